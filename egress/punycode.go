package egress

import (
	"errors"
	"strings"
)

// punyEncode encodes one label with RFC 3492's punycode (the part after "xn--").
// It implements only encoding, which is all a policy needs: rules and requests are
// both brought to A-labels and compared as ASCII.
func punyEncode(label string) (string, error) {
	const (
		base, tmin, tmax = 36, 1, 26
		skew, damp       = 38, 700
		initialBias      = 72
		initialN         = 128
	)
	runes := []rune(label)
	var out strings.Builder
	for _, r := range runes {
		if r < 0x80 {
			out.WriteByte(byte(r))
		}
	}
	b := out.Len()
	h := b
	if b > 0 {
		out.WriteByte('-')
	}
	n, delta, bias := rune(initialN), 0, initialBias
	digit := func(d int) byte {
		if d < 26 {
			return byte('a' + d)
		}
		return byte('0' + d - 26)
	}
	for h < len(runes) {
		m := rune(0x10FFFF + 1)
		for _, r := range runes {
			if r >= n && r < m {
				m = r
			}
		}
		if int(m-n) > (1<<30)/(h+1) {
			return "", errors.New("punycode: label too long")
		}
		delta += int(m-n) * (h + 1)
		n = m
		for _, r := range runes {
			if r < n {
				delta++
			}
			if r != n {
				continue
			}
			q := delta
			for k := base; ; k += base {
				t := k - bias
				if t < tmin {
					t = tmin
				} else if t > tmax {
					t = tmax
				}
				if q < t {
					break
				}
				out.WriteByte(digit(t + (q-t)%(base-t)))
				q = (q - t) / (base - t)
			}
			out.WriteByte(digit(q))
			bias = adapt(delta, h+1, h == b)
			delta = 0
			h++
		}
		delta++
		n++
	}
	return out.String(), nil
}

// adapt is RFC 3492's bias adaptation.
func adapt(delta, numPoints int, first bool) int {
	const base, tmin, tmax, skew, damp = 36, 1, 26, 38, 700
	if first {
		delta /= damp
	} else {
		delta /= 2
	}
	delta += delta / numPoints
	k := 0
	for delta > ((base-tmin)*tmax)/2 {
		delta /= base - tmin
		k += base
	}
	return k + (base-tmin+1)*delta/(delta+skew)
}
