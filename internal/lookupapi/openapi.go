package lookupapi

import _ "embed"

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 description of the API, as served at
// /api/v1/openapi.json.
func OpenAPI() []byte { return openAPIDoc }
