// Package notebook reads, parameterizes, executes and writes Jupyter notebooks
// (nbformat v4) on an executor session, the way nbclient and papermill do.
//
// Start reading at [Run]: it injects parameters ([Notebook.InjectParameters]), runs the
// code cells in order in one session, and fills in each cell's outputs and
// execution_count from the executor's event stream, so that update_display_data
// reaches displays of earlier cells. [Parse] and [Notebook.Encode] read and write the
// file; what this package does not model (metadata, attachments, unknown fields) is
// kept as raw JSON so that a notebook survives the round trip.
//
// Cells are skipped when they are empty or tagged "skip-execution"; an error stops
// the run unless RunOptions.AllowErrors is set or the cell is tagged
// "raises-exception"; a timeout or a kernel death always stops it. Cells that did not
// run keep their outputs and execution_count as they were, as nbclient does.
package notebook
