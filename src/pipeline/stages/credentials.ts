import type { Stage } from "../stage.js";

// Reads the caller's credentials, as the documents show them, from headers or gRPC metadata alike:
// `Authorization` (a token, with or without "Bearer "), `x-api-key` and `x-workspace-id`. This stage only reads;
// deciding who the caller is and what it may do is the access-control stage's work.
export const credentialsStage: Stage = (call, next) => {
  const authorization = call.headers.get("authorization") ?? undefined;
  const apiKey = call.headers.get("x-api-key") ?? undefined;
  const workspaceId = call.headers.get("x-workspace-id") ?? undefined;
  if (authorization !== undefined || apiKey !== undefined || workspaceId !== undefined) {
    call.credentials = { token: tokenOf(authorization), apiKey, workspaceId };
  }
  return next(call);
};

export function tokenOf(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const token = /^bearer\s+/i.test(authorization) ? authorization.replace(/^bearer\s+/i, "") : authorization;
  return token.trim() === "" ? undefined : token.trim();
}
