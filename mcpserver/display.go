package mcpserver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/executor"
)

// inlineImageTypes are the display data types returned as MCP image content.
var inlineImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// images returns the cell's images that fit the image budget as image content, the
// names of their artifacts, and notes about the ones left out.
func (s *server) images(res *executor.Result, arts []ArtifactInfo) ([]mcp.Content, map[string]bool, []string) {
	left := s.opts.MaxImageBytes
	inlined := map[string]bool{}
	var out []mcp.Content
	var notes []string
	for _, o := range res.Outputs {
		if o.OutputType != "display_data" && o.OutputType != "execute_result" {
			continue
		}
		for _, mt := range inlineImageTypes {
			raw, ok := o.Data[mt]
			if !ok {
				continue
			}
			img, ok := decodeBase64(raw)
			if !ok {
				continue
			}
			name := artifactFor(arts, img)
			if len(img) <= left {
				left -= len(img)
				out = append(out, &mcp.ImageContent{Data: img, MIMEType: mt})
				if name != "" {
					inlined[name] = true
				}
				continue
			}
			where := "it was not saved as an artifact"
			if name != "" {
				where = "read it with read_artifact name=" + strconv.Quote(name)
			}
			notes = append(notes, fmt.Sprintf("an image (%s, %s) was not shown inline: images are capped at %s per answer; %s",
				mt, humanBytes(int64(len(img))), humanBytes(int64(s.opts.MaxImageBytes)), where))
		}
	}
	return out, inlined, notes
}

// artifactFor returns the name of the artifact holding exactly data, or "".
func artifactFor(arts []ArtifactInfo, data []byte) string {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	for _, a := range arts {
		if a.SHA256 == h {
			return a.Name
		}
	}
	return ""
}

// structuredOutputs copies the outputs for the structured result: texts clipped to
// the limits (by stream name, "result" and "error"), rich data kept while it fits
// the image budget and left out (with a note) beyond it.
func (s *server) structuredOutputs(res *executor.Result, arts []ArtifactInfo, limits map[string]int, notes []string) ([]executor.Output, []string) {
	left := s.opts.MaxImageBytes
	outs := make([]executor.Output, 0, len(res.Outputs))
	for i, o := range res.Outputs {
		c := o
		switch o.OutputType {
		case "stream":
			if limit, ok := limits[o.Name]; ok {
				c.Text, _ = clipMiddle(o.Text, limit)
			}
		case "error":
			c.Traceback = clipLines(o.Traceback, limits["error"])
		case "display_data", "execute_result":
			textShare := limits["result"]
			if o.OutputType == "display_data" {
				textShare = s.opts.MaxTextBytes / 4
			}
			c.Data, notes = s.richOutput(i, o.Data, textShare, &left, arts, notes)
		}
		outs = append(outs, c)
	}
	return outs, notes
}

// richOutput copies the data of the display at outputs[i]: its plain text
// clipped to textShare, the rest kept while it fits in *left bytes, which it
// uses up, and left out with a note beyond it.
func (s *server) richOutput(i int, data map[string]json.RawMessage, textShare int, left *int, arts []ArtifactInfo, notes []string) (map[string]json.RawMessage, []string) {
	out := make(map[string]json.RawMessage, len(data))
	for _, mt := range sortedKeys(data) {
		raw := data[mt]
		if mt == "text/plain" {
			out[mt] = clipJSONText(raw, textShare)
			continue
		}
		if len(raw) <= *left {
			*left -= len(raw)
			out[mt] = raw
			continue
		}
		where := ""
		if b, ok := richData(raw); ok {
			if name := artifactFor(arts, b); name != "" {
				where = "; it is the artifact " + name
			}
		}
		notes = append(notes, fmt.Sprintf("outputs[%d]: its %s data (%s) is left out of this structured result, over the %s budget for rich data%s",
			i, mt, humanBytes(int64(len(raw))), humanBytes(int64(s.opts.MaxImageBytes)), where))
	}
	return out, notes
}

// decodeBase64 decodes base64 display data (an nbformat multiline string).
func decodeBase64(raw json.RawMessage) ([]byte, bool) {
	text, err := executor.MultilineString(raw)
	if err != nil {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' {
			return -1
		}
		return r
	}, text))
	return b, err == nil
}

// richData returns the bytes an artifact saved from display data would hold: the
// decoded base64 of images, the text of others.
func richData(raw json.RawMessage) ([]byte, bool) {
	if b, ok := decodeBase64(raw); ok {
		return b, true
	}
	text, err := executor.MultilineString(raw)
	return []byte(text), err == nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
