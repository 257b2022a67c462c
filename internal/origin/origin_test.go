package origin

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		origins []string
		site    string
		want    bool
	}{
		{"no origin", nil, "", true},
		{"same", []string{"http://kb.test:8700"}, "", true},
		{"same, other case", []string{"HTTP://KB.test:8700"}, "", true},
		{"https", []string{"https://kb.test:8700"}, "", true},
		{"other host", []string{"http://evil.test:8700"}, "", false},
		{"other port", []string{"http://kb.test:9999"}, "", false},
		{"null", []string{"null"}, "", false},
		{"two", []string{"http://kb.test:8700", "http://kb.test:8700"}, "", false},
		{"file scheme", []string{"file://kb.test:8700"}, "", false},
		{"cross-site marked", []string{"http://kb.test:8700"}, "cross-site", false},
		{"cross-site marked, no origin", nil, "cross-site", false},
	} {
		r := httptest.NewRequest("GET", "http://kb.test:8700/api/kernels/x/channels", nil)
		for _, o := range tc.origins {
			r.Header.Add("Origin", o)
		}
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		require.Equal(t, tc.want, Same(r), tc.name)
	}
}
