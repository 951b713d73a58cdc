// The challenge of an HTTP 401 (RFC 9110 15.5.2: a 401 MUST carry WWW-Authenticate with at least one challenge):
// the bearer token every surface but the XML one takes (the XML surface challenges Basic, for its sessions). It was
// missing on REST and Connect, whose 401s are HTTP statuses; gRPC and gRPC-web answer UNAUTHENTICATED with HTTP 200
// and carry none.
export const BEARER_CHALLENGE = 'Bearer realm="cloudplane"';
