package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/api"
)

// FileListing's JSON is flat, as before DirListing was split out of it: the
// session's id, then the directory's fields.
func TestFileListingJSON(t *testing.T) {
	t.Parallel()
	l := api.FileListing{SessionID: "s1", DirListing: api.DirListing{
		Path:    "outputs",
		Entries: []api.FileEntry{{Name: "a.csv", Type: "file", Size: 3, ModTime: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}},
	}}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"session_id":"s1","path":"outputs","entries":[{"name":"a.csv","type":"file","size":3,"mtime":"2026-12-07T00:00:00Z"}],"truncated":false}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back api.FileListing
	if err := json.Unmarshal(b, &back); err != nil || back.Path != "outputs" || back.SessionID != "s1" || len(back.Entries) != 1 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}
