import type { connectNodeAdapter } from "@connectrpc/connect-node";

// The request and response types Connect's Node adapter accepts (HTTP/1.1 or HTTP/2). connect-node does not
// export them by name.
type NodeHandler = ReturnType<typeof connectNodeAdapter>;
export type NodeRequest = Parameters<NodeHandler>[0];
export type NodeResponse = Parameters<NodeHandler>[1];
