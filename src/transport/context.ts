import { createContextKey } from "@connectrpc/connect";

// Per-call data set by interceptors and read by services, carried in contextValues rather than globals.
export const principalKey = createContextKey<string>("anonymous", { description: "authenticated principal" });
export const requestIdKey = createContextKey<string>("", { description: "request id of the call" });
