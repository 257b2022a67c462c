package mcpserver

import (
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/api"
)

// Most artifact lines and links one execute_code answer carries; list_artifacts
// has them all.
const (
	maxArtifactLines = 50
	maxLinks         = 20
)

// artifactInfos describes the result's artifacts with their resource URIs.
func artifactInfos(res *api.Result) []ArtifactInfo {
	arts := make([]ArtifactInfo, len(res.Artifacts))
	for i, a := range res.Artifacts {
		arts[i] = ArtifactInfo{Name: a.Name, URI: ArtifactURI(res.SessionID, a.Name), Path: a.Path, Size: a.Size, MIME: a.MIME, SHA256: a.SHA256, Partial: a.Partial}
	}
	return arts
}

// artifactLines lists the artifacts for the text answer, noting which are shown.
func artifactLines(arts []ArtifactInfo, inlined map[string]bool) string {
	if len(arts) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nartifacts (%d, read with read_artifact):\n", len(arts))
	for i, a := range arts {
		if i == maxArtifactLines {
			fmt.Fprintf(&b, "- ... and %d more: see list_artifacts\n", len(arts)-i)
			break
		}
		fmt.Fprintf(&b, "- %s (%s, %s) %s", a.Name, a.MIME, humanBytes(a.Size), a.URI)
		if inlined[a.Name] {
			b.WriteString(" [shown below]")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// artifactLinks links the first maxLinks artifacts not shown inline.
func artifactLinks(session string, arts []ArtifactInfo, inlined map[string]bool) []mcp.Content {
	var links []mcp.Content
	for _, a := range arts {
		if inlined[a.Name] || len(links) == maxLinks {
			continue
		}
		size := a.Size
		links = append(links, &mcp.ResourceLink{URI: a.URI, Name: a.Name, MIMEType: a.MIME, Size: &size,
			Description: "artifact of session " + session})
	}
	return links
}
