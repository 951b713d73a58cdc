// The challenge of an HTTP 401 (RFC 9110 15.5.2: a 401 MUST carry WWW-Authenticate with at least one challenge):
// the bearer token every call takes but POST /api/sessions (which challenges Basic, vcd-handler.ts). It was missing
// on REST, Connect, /metrics and the XML surface, whose 401s are HTTP statuses; gRPC and gRPC-web answer
// UNAUTHENTICATED with HTTP 200 and carry none.
export const BEARER_CHALLENGE = 'Bearer realm="cloudplane"';
