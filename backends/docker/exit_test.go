package docker

import (
	"context"
	"errors"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// waitAPI is fakeAPI with a ContainerWait whose answers the test gives, one per
// request, in order.
type waitAPI struct {
	*fakeAPI
	answers chan waitAnswer
	asked   chan struct{} // one value per wait request
}

type waitAnswer struct {
	code int64
	err  error
}

func (f *waitAPI) ContainerWait(ctx context.Context, _ string, _ client.ContainerWaitOptions) client.ContainerWaitResult {
	res, errc := make(chan container.WaitResponse, 1), make(chan error, 1)
	f.asked <- struct{}{}
	go func() {
		select {
		case a := <-f.answers:
			if a.err != nil {
				errc <- a.err
			} else {
				res <- container.WaitResponse{StatusCode: a.code}
			}
		case <-ctx.Done():
			errc <- ctx.Err()
		}
	}()
	return client.ContainerWaitResult{Result: res, Error: errc}
}

// A placement's container that stops running closes Lost, also after a failed wait
// request (asked again) or when the daemon no longer knows it; one that kernelbox
// removes itself does not, and its watch ends with the close.
func TestPlacementLostWhenContainerStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answers []waitAnswer // nil: none, the placement is closed instead
		lost    bool
	}{
		{"exits", []waitAnswer{{code: 137}}, true},
		{"wait fails, then exits", []waitAnswer{{err: errors.New("daemon restarting")}, {code: 143}}, true},
		{"removed by someone else", []waitAnswer{{err: cerrdefs.ErrNotFound}}, true},
		{"closed by kernelbox", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &waitAPI{fakeAPI: &fakeAPI{images: map[string]bool{DefaultImage: true}},
				answers: make(chan waitAnswer), asked: make(chan struct{}, 8)}
			b := newFakeBackend(t, f.fakeAPI)
			b.api = f
			p := &Placement{b: b, id: "c1", sockDir: t.TempDir(), lost: make(chan struct{})}
			b.track(p)
			p.watchExit()
			for _, a := range tt.answers {
				<-f.asked
				f.answers <- a
			}
			if !tt.lost {
				<-f.asked
				if err := p.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-p.Lost():
				if !tt.lost {
					t.Fatal("Lost closed for a container kernelbox removed")
				}
			case <-time.After(3 * time.Second):
				if tt.lost {
					t.Fatal("Lost not closed after the container stopped")
				}
			}
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
