package api

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// RichType is a MIME type of display data that kernelbox keeps: the executor saves
// such data as an artifact, and front ends may show it (Image types inline).
type RichType struct {
	// MIME is the media type, the key of the data in an output's MIME bundle.
	MIME string
	// Ext is the file extension of the artifact the data is saved as.
	Ext string
	// Base64 is set when the bundle holds the content base64-encoded (binary
	// images); otherwise it holds the content as text.
	Base64 bool
	// Image is set for raster images a client can show inline.
	Image bool
}

// RichTypes returns the rich MIME types, in the order an output's data is saved.
// It returns a new slice each time, which the caller may keep or change.
func RichTypes() []RichType {
	return []RichType{
		{MIME: "image/png", Ext: ".png", Base64: true, Image: true},
		{MIME: "image/jpeg", Ext: ".jpg", Base64: true, Image: true},
		{MIME: "image/gif", Ext: ".gif", Base64: true, Image: true},
		{MIME: "image/webp", Ext: ".webp", Base64: true, Image: true},
		{MIME: "image/svg+xml", Ext: ".svg"},
		{MIME: "text/html", Ext: ".html"},
	}
}

// RichTypeOf returns the rich type of the media type mt (parameters ignored), if it
// is one.
func RichTypeOf(mt string) (RichType, bool) {
	base, _, _ := strings.Cut(mt, ";")
	base = strings.ToLower(strings.TrimSpace(base))
	for _, t := range RichTypes() {
		if t.MIME == base {
			return t, true
		}
	}
	return RichType{}, false
}

// Decode returns the content a bundle value of this type holds: the decoded bytes of
// base64 data (line breaks and spaces ignored), the text of other data. raw is an
// nbformat multiline string. It reports false when raw is not one, or not valid
// base64 for a Base64 type.
func (t RichType) Decode(raw json.RawMessage) ([]byte, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	s, err := MultilineString(raw)
	if err != nil {
		return nil, false
	}
	if !t.Base64 {
		return []byte(s), true
	}
	b, err := base64.StdEncoding.DecodeString(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' {
			return -1
		}
		return r
	}, s))
	return b, err == nil
}
