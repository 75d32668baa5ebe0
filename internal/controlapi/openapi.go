package controlapi

import (
	_ "embed"
	"net/http"

	"github.com/patchline/patchline/internal/httpx"
)

// OpenAPI is the OpenAPI 3.1 description of the control API and the agent
// protocol, served at /api/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) getOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "public, max-age=3600")
	httpx.WriteJSONBytes(w, http.StatusOK, OpenAPI)
	return nil
}
