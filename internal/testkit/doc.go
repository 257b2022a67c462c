// Package testkit holds nothing itself: its sub-packages exist for tests only. They
// wire real backends, Jupyter servers, network namespaces and leak checks for the
// tests of the packages above them, so that those tests import no backend package,
// and no production package imports any of them (cmd/kernelbox's layering_test.go
// checks both).
package testkit
