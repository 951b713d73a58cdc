import { create } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { ServiceAuthRequestSchema } from "../../../gen/compute/auth/v2/auth_pb.js";
import type { ServiceAuthResponse } from "../../../gen/compute/auth/v2/auth_pb.js";
import { AuthService } from "../../../gen/compute/auth/v2/auth_pb.js";
import { Call, requestIdOf } from "../../pipeline/call.js";
import { callErrorOf } from "../../pipeline/call-error.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import { httpStatusOfError, retryAfterSeconds } from "../rest/status-json.js";
import type { MethodTable } from "../../pipeline/method-table.js";
import { NodeHeaders } from "../header-source.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import { negotiateVersion } from "./vcd-versions.js";
import { VCLOUD_NS, errorDocument, minorErrorCodeOf, xmlDocument } from "./vcd-xml.js";

export interface VcdSettings {
  table: MethodTable;
  supportedVersions: readonly string[];
  logger: Logger;
}

const SESSION_TYPE = "application/vnd.vmware.vcloud.session+xml";
const ERROR_TYPE = "application/vnd.vmware.vcloud.error+xml";

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

// The adapter of the virtualization API's XML surface (`/api/...`, CONTRACT section 7): it decodes the request,
// calls the pipeline and encodes the answer as that API's XML, like every other adapter. Today it serves
// POST /api/sessions: Basic credentials of a service account (user `<client id>` or `<client id>@<org>`) for an
// access token in X-VMWARE-VCLOUD-ACCESS-TOKEN, through the same ServiceAuth method as POST /public/v2/service_auth.
export function createVcdHandler(settings: VcdSettings): (req: NodeRequest, res: NodeResponse) => Promise<void> {
  const serviceAuth = settings.table.of(AuthService.method.serviceAuth);

  function failure(version: string | null, httpStatus: number, message: string, extra: Record<string, string> = {}): Answer {
    const type = version === null ? "application/xml" : `${ERROR_TYPE};version=${version}`;
    return { status: httpStatus, headers: { "content-type": type, ...extra }, body: errorDocument(httpStatus, minorErrorCodeOf(httpStatus), message) };
  }

  async function createSession(req: NodeRequest, version: string, requestId: string): Promise<Answer> {
    const basic = basicCredentials(req.headers.authorization);
    if (basic === null) {
      return failure(version, 401, "POST /api/sessions needs Authorization: Basic base64(<client id>[@<org>]:<client secret>)", {
        "www-authenticate": 'Basic realm="cloudplane"',
      });
    }
    const request = create(ServiceAuthRequestSchema, { clientId: basic.user, clientSecret: basic.password });
    const call = new Call(serviceAuth, "vcd", request, new NodeHeaders(req.headers), requestId, null, req.socket);
    let response: ServiceAuthResponse;
    try {
      response = (await serviceAuth.invoke!(call)) as ServiceAuthResponse;
    } catch (thrown) {
      // The HTTP status and Retry-After the REST surface gives the same error.
      const error = toConnectError(callErrorOf(thrown, serviceAuth.policy.domain, requestId), null);
      const status = httpStatusOfError(error);
      const extra: Record<string, string> = status === 401 ? { "www-authenticate": 'Basic realm="cloudplane"' } : {};
      const retryAfter = retryAfterSeconds(error);
      if (retryAfter !== undefined) extra["retry-after"] = String(retryAfter);
      return failure(version, status, error.rawMessage, { ...stageHeaders(call), ...extra });
    }
    const site = req.headers.host ?? "localhost";
    return {
      status: 200,
      headers: {
        ...stageHeaders(call),
        "content-type": `${SESSION_TYPE};version=${version}`,
        "x-vmware-vcloud-access-token": response.token?.accessToken ?? "",
        "x-vmware-vcloud-token-type": "Bearer",
      },
      body: xmlDocument("Session", {
        "@_xmlns": VCLOUD_NS,
        "@_user": basic.user,
        "@_org": basic.org,
        "@_href": `https://${site}/api/session`,
        "@_type": SESSION_TYPE,
      }),
    };
  }

  async function answer(req: NodeRequest, requestId: string): Promise<Answer> {
    const path = (req.url ?? "/").split("?", 1)[0];
    const version = negotiateVersion(req.headers.accept, settings.supportedVersions);
    if (version === null) {
      return failure(null, 406, `send Accept: application/*;version=<v> with a supported version: ${settings.supportedVersions.join(", ")}`);
    }
    if (path === "/api/sessions") {
      if (req.method !== "POST") return failure(version, 405, "/api/sessions takes POST", { allow: "POST" });
      return createSession(req, version, requestId);
    }
    return failure(version, 404, `no resource at ${path}`);
  }

  return async (req, res) => {
    const requestId = requestIdOf(req.headers["x-request-id"] as string | undefined);
    let result: Answer;
    try {
      result = await answer(req, requestId);
    } catch (err) {
      settings.logger.error({ err, requestId }, "a virtualization API call failed");
      result = failure(null, 500, `internal error; quote request id ${requestId} when reporting it`);
    }
    if (res.headersSent || res.destroyed) return;
    res.writeHead(result.status, { ...result.headers, "x-request-id": requestId });
    res.end(result.body);
  };
}

// The headers the pipeline's stages added (X-RateLimit-*), written on success and failure alike, as every adapter
// does.
function stageHeaders(call: Call): Record<string, string> {
  return Object.fromEntries(call.responseHeaders ?? []);
}

interface BasicCredentials {
  user: string;
  org: string;
  password: string;
}

// Basic credentials as the virtualization API takes them: `user@org:password`; the org is optional here, since a
// service account belongs to no org.
function basicCredentials(header: string | undefined): BasicCredentials | null {
  const match = /^basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? "");
  if (match === null) return null;
  const text = Buffer.from(match[1]!, "base64").toString("utf8");
  const colon = text.indexOf(":");
  if (colon <= 0) return null;
  const login = text.slice(0, colon);
  const at = login.indexOf("@");
  return {
    user: at < 0 ? login : login.slice(0, at),
    org: at < 0 ? "System" : login.slice(at + 1),
    password: text.slice(colon + 1),
  };
}
