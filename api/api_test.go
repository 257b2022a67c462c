package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/kernelbox/kernelbox/api"
)

func TestCodeOfAndErrorOfAgree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    error
		code   api.Code
		status int
	}{
		{api.ErrInvalidRequest, api.CodeInvalidRequest, http.StatusBadRequest},
		{api.ErrDenied, api.CodeDenied, http.StatusForbidden},
		{api.ErrDisabled, api.CodeDisabled, http.StatusServiceUnavailable},
		{api.ErrTooManySessions, api.CodeTooManySessions, http.StatusTooManyRequests},
		{api.ErrQueueFull, api.CodeQueueFull, http.StatusTooManyRequests},
		{api.ErrNotFound, api.CodeNotFound, http.StatusNotFound},
		{api.ErrSessionClosed, api.CodeSessionClosed, http.StatusConflict},
		{api.ErrClosed, api.CodeShuttingDown, http.StatusServiceUnavailable},
		{api.ErrBackend, api.CodeBackend, http.StatusBadGateway},
		{api.ErrTooLarge, api.CodeTooLarge, http.StatusRequestEntityTooLarge},
		{api.ErrTooManyNotebookRuns, api.CodeTooManyNotebookRuns, http.StatusTooManyRequests},
		{context.Canceled, api.CodeCanceled, 499},
		{errors.New("something else"), api.CodeInternal, http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			t.Parallel()
			wrapped := fmt.Errorf("start kernel: %w", tt.err)
			code, status := api.CodeOf(wrapped)
			if code != tt.code || status != tt.status {
				t.Fatalf("CodeOf(%v) = %s %d, want %s %d", wrapped, code, status, tt.code, tt.status)
			}
			if tt.code == api.CodeInternal {
				if api.ErrorOf(code) != nil {
					t.Fatalf("ErrorOf(internal) = %v, want nil", api.ErrorOf(code))
				}
				return
			}
			if got := api.ErrorOf(code); got != tt.err {
				t.Fatalf("ErrorOf(%s) = %v, want %v", code, got, tt.err)
			}
		})
	}
}

func TestValidSessionID(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		"s1": true, "a_b-C9": true, "": false, "a b": false, "../x": false, "é": false,
		"x\x00": false, "0123456789012345678901234567890123456789012345678901234567890123": true,
		"01234567890123456789012345678901234567890123456789012345678901234": false,
	}
	for id, want := range tests {
		if got := api.ValidSessionID(id); got != want {
			t.Errorf("ValidSessionID(%q) = %v, want %v", id, got, want)
		}
	}
}

func ExampleCodeOf() {
	err := fmt.Errorf("stage inputs: %w", api.ErrDenied)
	code, status := api.CodeOf(err)
	fmt.Println(code, status)
	// Output: permission_denied 403
}

func TestTemplateForKernel(t *testing.T) {
	t.Parallel()
	ts := []api.TemplateInfo{
		{Name: "analyst", Kernel: "python3", KernelNames: []string{"conda-py"}},
		{Name: "r-small", Kernel: "ir"},
		{Name: "default", Kernel: "python3"},
		{Name: "r-big", Kernel: "ir", KernelNames: []string{"ir-4"}},
	}
	for name, want := range map[string]string{
		"analyst": "analyst", "default": "default", "python3": "default", "python": "default",
		"ir": "r-big", "ir-4": "r-big", "conda-py": "analyst", "julia-1.9": "", "": "",
	} {
		if got, ok := api.TemplateForKernel(ts, name); got != want || ok != (want != "") {
			t.Errorf("TemplateForKernel(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	// Without a default of the language, the first template of it by name.
	if got, _ := api.TemplateForKernel(ts[:1], "python3"); got != "analyst" {
		t.Errorf("python3 without a default template: %q, want analyst", got)
	}
	want := map[string]string{"python3": "default", "python": "default", "ir": "r-big", "ir-4": "r-big", "conda-py": "analyst"}
	if got := api.KernelAliases(ts); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("KernelAliases = %v, want %v", got, want)
	}
	if api.KernelLanguage("IR") != "R" || api.KernelLanguage("") != "python" {
		t.Error("KernelLanguage")
	}
}
