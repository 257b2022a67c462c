package notebook

import "github.com/kernelbox/kernelbox/api"

// outputBuilder turns the executor's events for one cell into the cell's nbformat
// outputs, the way nbclient does: consecutive streams merged, clear_output applied
// (with wait, at the next output), and a display_id's new data written into every
// output that shows that display id, in any cell of the notebook so far.
//
// The per-call Result applies updates only within its own call, which is why the
// notebook is built from events. Events come from the session's worker goroutine
// while Run waits in ExecuteStream, so the builder needs no lock.
type outputBuilder struct {
	nb           *Notebook
	cell         int // index of the cell being run
	outs         []api.Output
	clearPending bool
}

// start begins collecting the outputs of cell i.
func (b *outputBuilder) start(i int) {
	b.cell, b.outs, b.clearPending = i, []api.Output{}, false
}

func (b *outputBuilder) event(ev api.Event) {
	switch ev.Type {
	case "stream":
		b.applyClear()
		if n := len(b.outs); n > 0 && b.outs[n-1].OutputType == "stream" && b.outs[n-1].Name == ev.Name {
			b.outs[n-1].Text += ev.Text
			return
		}
		b.outs = append(b.outs, api.Output{OutputType: "stream", Name: ev.Name, Text: ev.Text})
	case "display", "result":
		if ev.Output == nil {
			return
		}
		b.applyClear()
		// nbclient also updates earlier outputs when a new display reuses a
		// display id, not only on update_display_data.
		b.update(*ev.Output)
		b.outs = append(b.outs, *ev.Output)
	case "update_display":
		if ev.Output != nil {
			b.update(*ev.Output)
		}
	case "error":
		if ev.Output == nil {
			return
		}
		b.applyClear()
		b.outs = append(b.outs, *ev.Output)
	case "clear_output":
		if ev.Wait {
			b.clearPending = true
		} else {
			b.outs = []api.Output{}
		}
	}
}

func (b *outputBuilder) applyClear() {
	if b.clearPending {
		b.clearPending = false
		b.outs = []api.Output{}
	}
}

// update gives every output showing out's display id out's data and metadata. Only
// outputs produced in this run carry a display id: outputs read from the file do
// not, as nbformat does not store it.
func (b *outputBuilder) update(out api.Output) {
	if out.DisplayID == "" {
		return
	}
	set := func(outs []api.Output) {
		for i := range outs {
			if outs[i].DisplayID == out.DisplayID {
				outs[i].Data, outs[i].Metadata = out.Data, out.Metadata
			}
		}
	}
	for i, c := range b.nb.Cells {
		if i != b.cell {
			set(c.Outputs)
		}
	}
	set(b.outs)
}
