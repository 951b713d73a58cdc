// Every ErrorInfo.reason the server can send, with the sentence that documents it. Callers branch on these
// strings, so they are stable: add new ones, never rename. test/unit/error-reasons.test.ts checks that each one
// is described in docs/errors.md.
export const reasons = {
  REQUEST_INVALID: "A request field is missing, malformed or out of range; BadRequest names each field.",
  MALFORMED_BODY: "The request body is not valid JSON, not a well-formed message of its protocol, or does not fit the request message.",
  PROTOCOL_ERROR: "The request breaks a rule of its protocol or uses a feature the server lacks (an unknown compression, a unary call without exactly one message, a timeout header not of its form); the message says which.",
  DEADLINE_EXCEEDED: "The call did not finish within the deadline the caller set (grpc-timeout or connect-timeout-ms).",
  UNKNOWN_FIELD: "The request names a JSON field or query parameter the method does not have.",
  FIELD_MISMATCH: "A field given both in the path and in the body has two different values.",
  UNSUPPORTED_CONTENT_TYPE: "A REST request body, or a POST with or without a body, was sent with a Content-Type other than application/json; or a virtualization API instantiation was not sent as application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml.",
  REQUEST_TOO_LARGE: "The request body is larger than the server accepts (4 MiB; 64 KiB for a virtualization API XML body).",
  REQUEST_HEAD_TOO_LARGE: "The HTTP/1.1 request line and headers are larger than the server accepts (16 KiB), answered 431.",
  ROUTE_NOT_FOUND: "No REST or virtualization API route matches the request path.",
  SERVER_SHUTTING_DOWN: "The server is stopping gracefully: a call open by design (a health Watch) ends with UNAVAILABLE after its NOT_SERVING, and a call that arrives meanwhile is refused before it changes anything; connect again, to this server once it is back or to another.",
  TOO_MANY_OPEN_STREAMS: "The server already holds as many calls open by design (health Watch, streaming reflection) as MAX_LONG_LIVED_CALLS allows, or the connection as many as MAX_LONG_LIVED_CALLS_PER_CONNECTION: close one, or retry later.",
  PROCEDURE_NOT_FOUND: "A gRPC, gRPC-web or Connect call names a service or method this server does not have (UNIMPLEMENTED).",
  METHOD_NOT_ALLOWED: "The REST or virtualization API path exists, but not for this HTTP method.",
  CRYPTO_KEY_NOT_FOUND: "No live key has the given id.",
  CRYPTO_KEY_VERSION_NOT_FOUND: "The key has no version with the given number.",
  CRYPTO_KEY_NAME_TAKEN: "Another live key of the namespace already has this name.",
  CRYPTO_KEY_VERSION_NOT_ENABLED: "The operation needs an ENABLED version and the version is in another state.",
  CRYPTO_KEY_VERSION_IS_PRIMARY: "An ENABLED primary version cannot be disabled or destroyed; make another version primary first.",
  CRYPTO_KEY_DESTRUCTION_SCHEDULED:
    "The key is scheduled for destruction (DestroyCryptoKey): it serves neither Encrypt nor Decrypt and takes no new version until one of its versions is restored, enabled and made primary.",
  CRYPTO_KEY_VERSION_STATE_TRANSITION: "The version's current state does not allow the requested transition.",
  CIPHERTEXT_INVALID: "The ciphertext was altered, truncated, made with another key or checked with other additional authenticated data.",
  HEALTH_SERVICE_UNKNOWN: "Health check of a service name the server does not report on.",
  INTERNAL: "A fault in the server; the message carries a request id to quote, the details are in the server log.",
  SERVICE_INSTANCE_NOT_FOUND: "No service instance (vDC) of the platform catalog has the given serviceInstanceId.",
  CLUSTER_NOT_FOUND: "The service instance has no cluster with the given clusterId.",
  NODE_POOL_NOT_FOUND: "The service instance has no node pool with the given nodePoolId (never created, or deleted).",
  NODE_POOL_NAME_TAKEN: "Another node pool of the cluster already has this name, or is being renamed to it.",
  NODE_POOL_TASK_IN_PROGRESS: "The node pool has an unfinished task; wait for it (ErrorInfo metadata taskId) before changing the pool again.",
  TASK_NOT_FOUND: "The service instance has no task with the given taskId.",
  NODE_CAPACITY_EXHAUSTED: "Task error: the cluster has fewer free nodes than the node pool needs; QuotaFailure and ErrorInfo metadata give the numbers.",
  COMPUTE_FLAVOR_UNAVAILABLE: "Task error: the compute flavor exists but has no nodes to give now; retry after the RetryInfo delay or pick another flavor.",
  INVALID_REFERENCE: "The vApp template (Source href or id) or org network the request names does not exist, is not an href of this site, or is not in that vDC; BadRequest names the field.",
  EULA_NOT_ACCEPTED: "The vApp template has EULAs and the request did not accept them (AllEULAsAccepted true).",
  VAPP_NAME_TAKEN: "Another vApp of the vDC already has this name.",
  VAPP_NOT_FOUND: "No vApp has the given id, or it is in a vDC the caller holds no grant on.",
  VAPP_TASK_NOT_FOUND: "No vApp task has the given id, or it is in a vDC the caller holds no grant on.",
  XML_INVALID: "A virtualization API request body is not well-formed XML (an undeclared entity, a reference to a character XML forbids, bytes that are not UTF-8 included), declares a DOCTYPE or entities, is not the expected document, or has its elements out of the schema's order.",
  QUERY_INVALID: "A virtualization API query names an unsupported type or format, or has a parameter that is unknown or not a number where one is needed.",
  UNAUTHENTICATED: "The call carries no credentials, or its token or API key is malformed, unknown, expired or revoked; get a token from POST /public/v2/service_auth.",
  PERMISSION_DENIED: "The caller is authenticated but holds no grant whose role allows the method on the call's scope; ErrorInfo metadata names the permission and the scope.",
  API_KEY_WORKSPACE_MISMATCH: "The API key of x-api-key belongs to another workspace than the one x-workspace-id names.",
  AUTHENTICATION_RATE_LIMITED: "Too many failed authentications from the caller's address or for the client id; retry after the RetryInfo delay.",
  RATE_LIMIT_EXCEEDED: "The credential made more calls of this HTTP method (GET, or POST with PATCH and DELETE) than the limit per minute or per day allows; ErrorInfo metadata gives method, limitPerMinute and limitPerDay, QuotaFailure the window that holds the caller back longest (the day once it is spent), RetryInfo (and Retry-After) when it starts afresh.",
  RATE_LIMITER_UNAVAILABLE: "The shared store of the rate limits (Redis) cannot be reached and the server is set to refuse calls it cannot count (RATE_LIMIT_STORE_FAILURE=closed); retry after the RetryInfo delay.",
  AUDIT_UNAVAILABLE: "The call could not be recorded in the audit trail, so its result is not returned; a change it made may have taken effect all the same (read before retrying a change); retry later.",
  REQUEST_BODIES_BUSY: "The server holds as many request bodies in memory as MAX_BUFFERED_REQUEST_BYTES allows, all connections together; retry after the RetryInfo delay.",
  STORE_UNAVAILABLE: "The server's store cannot be written or reached for now (a full disk, a lost or refused database connection); retry after the RetryInfo delay.",
} as const;

export type Reason = keyof typeof reasons;

// ErrorInfo.domain: which product area raised the error.
export type ErrorDomain = "kms" | "compute" | "cloudplane";
