package mcpserver

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/api"
)

// images returns the cell's images (the api.RichTypes that are images) that fit the
// image budget as image content, the names of their artifacts, and notes about the
// ones left out. Each output says which artifact its data was saved as.
func (s *server) images(res *api.Result) ([]mcp.Content, map[string]bool, []string) {
	left := s.opts.MaxImageBytes
	inlined := map[string]bool{}
	var out []mcp.Content
	var notes []string
	for _, o := range res.Outputs {
		if o.OutputType != "display_data" && o.OutputType != "execute_result" {
			continue
		}
		for _, rt := range api.RichTypes() {
			mt := rt.MIME
			raw, ok := o.Data[mt]
			if !rt.Image || !ok {
				continue
			}
			img, ok := rt.Decode(raw)
			if !ok {
				continue
			}
			name := o.Artifacts[mt]
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

// structuredOutputs copies the outputs for the structured result: texts clipped to
// the limits (by stream name, "result" and "error"), rich data kept while it fits
// the image budget and left out (with a note) beyond it.
func (s *server) structuredOutputs(res *api.Result, limits map[string]int, notes []string) ([]api.Output, []string) {
	left := s.opts.MaxImageBytes
	outs := make([]api.Output, 0, len(res.Outputs))
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
			c.Data, notes = s.richOutput(i, o, textShare, &left, notes)
		}
		outs = append(outs, c)
	}
	return outs, notes
}

// richOutput copies the data of the display o at outputs[i]: its plain text
// clipped to textShare, the rest kept while it fits in *left bytes, which it
// uses up, and left out with a note (naming the artifact it was saved as) beyond it.
func (s *server) richOutput(i int, o api.Output, textShare int, left *int, notes []string) (map[string]json.RawMessage, []string) {
	data := o.Data
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
		if name := o.Artifacts[mt]; name != "" {
			where = "; it is the artifact " + name
		}
		notes = append(notes, fmt.Sprintf("outputs[%d]: its %s data (%s) is left out of this structured result, over the %s budget for rich data%s",
			i, mt, humanBytes(int64(len(raw))), humanBytes(int64(s.opts.MaxImageBytes)), where))
	}
	return out, notes
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
