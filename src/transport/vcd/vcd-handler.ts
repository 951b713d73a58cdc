import { create } from "@bufbuild/protobuf";
import type { Message } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { ServiceAuthRequestSchema } from "../../../gen/compute/auth/v2/auth_pb.js";
import type { ServiceAuthResponse } from "../../../gen/compute/auth/v2/auth_pb.js";
import { AuthService } from "../../../gen/compute/auth/v2/auth_pb.js";
import { GetVAppRequestSchema, GetVAppTaskRequestSchema, VAppService } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import type { ListVAppTemplatesResponse, VApp, VAppTask } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import { emptyHost } from "../../errors/protocol-errors.js";
import { Call, requestIdOf } from "../../pipeline/call.js";
import type { MethodEntry, MethodTable } from "../../pipeline/method-table.js";
import { NodeHeaders } from "../header-source.js";
import { MALFORMED_ESCAPE } from "../rest/rest-errors.js";
import { malformedEscapeParameter } from "../rest/query-params.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import type { BodyBudget } from "../limits/body-budget.js";
import { ClientGoneError, readBody } from "../rest/body-reader.js";
import { requestAuthority } from "../rest/request-target.js";
import { MEDIA, queryRecordsDocument, taskDocument, vappDocument, vappHref } from "./vcd-documents.js";
import type { Site } from "./vcd-documents.js";
import { errorAnswer, refusal } from "./vcd-errors.js";
import type { Answer } from "./vcd-errors.js";
import { INSTANTIATE_PARAMS_TYPE, decodeInstantiateParams } from "./vcd-instantiate-params.js";
import { QueryRefusal, decodeQuery } from "./vcd-query.js";
import { negotiateVersion } from "./vcd-versions.js";
import { VCLOUD_NS, xmlDocument } from "./vcd-xml.js";
import { XmlRefusal } from "./xml-refusal.js";

export interface VcdSettings {
  table: MethodTable;
  supportedVersions: readonly string[];
  bodyBudget: BodyBudget;
  logger: Logger;
}

// An InstantiateVAppTemplateParams document is a few kilobytes. Reading XML costs about 2 ms per kilobyte here
// (fast-xml-parser's validator and parser, measured on this machine), so the bound keeps one request's parse near
// 100 ms of the event loop; a larger body is refused unread (413).
export const MAX_XML_BODY_BYTES = 64 * 1024;

const SESSION_TYPE = "application/vnd.vmware.vcloud.session+xml";
const BASIC_CHALLENGE = { "www-authenticate": 'Basic realm="cloudplane"' };

const VDC_ACTION = "/api/vdc/";
const INSTANTIATE_ACTION = "/action/instantiateVAppTemplate";
const VAPP_PREFIX = "/api/vApp/vapp-";
const TASK_PREFIX = "/api/task/";

// The adapter of the virtualization API's XML surface (`/api/...`, CONTRACT section 7), like the REST adapter: it
// decodes the request into the message of a VAppService (or AuthService) method, runs that method's pipeline
// (request id, errors, deadline, credentials, authentication, audit, authorization, handler), and encodes the
// answer, or the error, as that API's XML. Nothing here checks access or values: the stages and the domain do.
export function createVcdHandler(settings: VcdSettings): (req: NodeRequest, res: NodeResponse) => Promise<void> {
  const { table } = settings;
  const serviceAuth = table.of(AuthService.method.serviceAuth);
  const listTemplates = table.of(VAppService.method.listVAppTemplates);
  const instantiate = table.of(VAppService.method.instantiateVAppTemplate);
  const getVApp = table.of(VAppService.method.getVApp);
  const getTask = table.of(VAppService.method.getVAppTask);

  // Runs the method's pipeline; a refusal becomes the Error document with the status the REST surface would give.
  // The headers the stages added go on the answer either way.
  // `started`: when the request's headers arrived, for a call made after reading its body (the deadline counts from
  // then); else now.
  async function run<T>(entry: MethodEntry, request: Message, req: NodeRequest, version: string, requestId: string, started: number | null = null): Promise<{ ok: T; headers: Record<string, string> } | { failed: Answer }> {
    const call = new Call(entry, "vcd", request, new NodeHeaders(req.headers), requestId, null, req.socket, null, started);
    const stageHeaders = (): Record<string, string> => Object.fromEntries(call.responseHeaders ?? []);
    try {
      const response = (await entry.invoke!(call)) as T;
      return { ok: response, headers: stageHeaders() };
    } catch (thrown) {
      const answer = errorAnswer(version, thrown, entry.policy.domain, requestId, settings.logger);
      Object.assign(answer.headers, stageHeaders());
      return { failed: answer };
    }
  }

  function ok(status: number, type: string, version: string, body: string, extra: Record<string, string> = {}): Answer {
    return { status, headers: { "content-type": `${type};version=${version}`, ...extra }, body };
  }

  async function createSession(req: NodeRequest, version: string, requestId: string): Promise<Answer> {
    const basic = basicCredentials(req.headers.authorization);
    if (basic === null) {
      return refusal(version, 401, "POST /api/sessions needs Authorization: Basic base64(<client id>[@<org>]:<client secret>)", "UNAUTHENTICATED", BASIC_CHALLENGE);
    }
    const request = create(ServiceAuthRequestSchema, { clientId: basic.user, clientSecret: basic.password });
    const result = await run<ServiceAuthResponse>(serviceAuth, request, req, version, requestId);
    if ("failed" in result) {
      if (result.failed.status === 401) Object.assign(result.failed.headers, BASIC_CHALLENGE);
      return result.failed;
    }
    return ok(200, SESSION_TYPE, version, xmlDocument("Session", {
      "@_xmlns": VCLOUD_NS,
      "@_user": basic.user,
      "@_org": basic.org,
      "@_href": `${siteOf(req).base}/api/session`,
      "@_type": SESSION_TYPE,
    }), {
      ...result.headers,
      "x-vmware-vcloud-access-token": result.ok.token?.accessToken ?? "",
      "x-vmware-vcloud-token-type": "Bearer",
    });
  }

  async function query(req: NodeRequest, search: string, version: string, requestId: string): Promise<Answer> {
    // URLSearchParams reads a malformed escape as U+FFFD: `filter=name==%FF` answered total="0" (a probe, 2026-11-28).
    const malformed = malformedEscapeParameter(search);
    if (malformed !== null) return refusal(version, 400, `${malformed === "" ? "" : `${malformed}: `}invalid value in the query string; ${MALFORMED_ESCAPE}`, "REQUEST_INVALID");
    const params = new URLSearchParams(search);
    let request;
    try {
      request = decodeQuery(params);
    } catch (err) {
      if (err instanceof QueryRefusal) return refusal(version, 400, err.message, err.reason);
      throw err;
    }
    const result = await run<ListVAppTemplatesResponse>(listTemplates, request, req, version, requestId);
    if ("failed" in result) return result.failed;
    const site = siteOf(req);
    const pageHref = (page: number): string => {
      const next = new URLSearchParams(params);
      next.set("page", String(page));
      next.set("pageSize", String(result.ok.pageSize));
      return `${site.base}/api/query?${next.toString()}`;
    };
    const body = queryRecordsDocument(site, { response: result.ok, href: `${site.base}${req.url ?? ""}`, pageHref });
    return ok(200, MEDIA.records, version, body, result.headers);
  }

  async function instantiateTemplate(req: NodeRequest, vdcId: string, version: string, requestId: string): Promise<Answer> {
    const started = performance.now();
    const type = (req.headers["content-type"] ?? "").split(";", 1)[0]!.trim().toLowerCase();
    if (type !== INSTANTIATE_PARAMS_TYPE.toLowerCase()) {
      return refusal(version, 415, `send the body as Content-Type: ${INSTANTIATE_PARAMS_TYPE}${type === "" ? "" : `, not ${type.slice(0, 100)}`}`, "UNSUPPORTED_CONTENT_TYPE");
    }
    let request;
    try {
      request = decodeInstantiateParams(utf8Text(await readBody(req, MAX_XML_BODY_BYTES, instantiate.policy.domain, settings.bodyBudget)), vdcId);
    } catch (err) {
      if (err instanceof XmlRefusal) return refusal(version, 400, err.message, "XML_INVALID");
      if (err instanceof ClientGoneError) throw err;
      return errorAnswer(version, err, instantiate.policy.domain, requestId, settings.logger);
    }
    const result = await run<VApp>(instantiate, request, req, version, requestId, started);
    if ("failed" in result) return result.failed;
    const site = siteOf(req);
    return ok(201, MEDIA.vapp, version, vappDocument(site, result.ok), { ...result.headers, location: vappHref(site, result.ok.id) });
  }

  async function readVApp(req: NodeRequest, vappId: string, version: string, requestId: string): Promise<Answer> {
    const result = await run<VApp>(getVApp, create(GetVAppRequestSchema, { vappId }), req, version, requestId);
    return "failed" in result ? result.failed : ok(200, MEDIA.vapp, version, vappDocument(siteOf(req), result.ok), result.headers);
  }

  async function readTask(req: NodeRequest, taskId: string, version: string, requestId: string): Promise<Answer> {
    const result = await run<VAppTask>(getTask, create(GetVAppTaskRequestSchema, { taskId }), req, version, requestId);
    return "failed" in result ? result.failed : ok(200, MEDIA.task, version, taskDocument(siteOf(req), result.ok), result.headers);
  }

  async function answer(req: NodeRequest, requestId: string): Promise<Answer> {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q < 0 ? url : url.slice(0, q);
    const search = q < 0 ? "" : url.slice(q + 1);
    const method = req.method ?? "GET";
    const version = negotiateVersion(req.headers.accept, settings.supportedVersions);
    if (version === null) {
      return refusal(null, 406, `send Accept: application/*;version=<v> with a supported version: ${settings.supportedVersions.join(", ")}`, "PROTOCOL_ERROR");
    }
    // Every answer here holds links made with the host (siteOf): "https:///api/..." for an empty Host.
    if (requestAuthority(req.headers) === "") return errorAnswer(version, emptyHost("compute"), "compute", requestId, null);
    // HEAD is served as the GET of its path (RFC 9110 9.3.2: a general-purpose server MUST support it), the same
    // call of the same method; the answer then goes without its body.
    const only = (allowed: "GET" | "POST", then: () => Promise<Answer>): Promise<Answer> => {
      if (method === allowed || (method === "HEAD" && allowed === "GET")) return then();
      const allow = allowed === "GET" ? "GET, HEAD" : allowed;
      return Promise.resolve(refusal(version, 405, `${path} takes ${allow}`, "METHOD_NOT_ALLOWED", { allow }));
    };
    if (path === "/api/sessions") return only("POST", () => createSession(req, version, requestId));
    if (path === "/api/query") return only("GET", () => query(req, search, version, requestId));
    const vdcId = idBetween(path, VDC_ACTION, INSTANTIATE_ACTION);
    if (vdcId !== null) return only("POST", () => instantiateTemplate(req, vdcId, version, requestId));
    const vappId = idBetween(path, VAPP_PREFIX, "");
    if (vappId !== null) return only("GET", () => readVApp(req, vappId, version, requestId));
    const taskId = idBetween(path, TASK_PREFIX, "");
    if (taskId !== null) return only("GET", () => readTask(req, taskId, version, requestId));
    return refusal(version, 404, `no resource at ${path.slice(0, 200)}`, "ROUTE_NOT_FOUND");
  }

  return async (req, res) => {
    const requestId = requestIdOf(req.headers["x-request-id"] as string | undefined);
    let result: Answer;
    try {
      result = await answer(req, requestId);
    } catch (err) {
      if (err instanceof ClientGoneError || res.destroyed) return;
      result = errorAnswer(null, err, "compute", requestId, settings.logger);
    }
    if (res.headersSent || res.destroyed) return;
    if (req.method !== "HEAD") {
      res.writeHead(result.status, { ...result.headers, "x-request-id": requestId });
      res.end(result.body);
      return;
    }
    // HEAD: the GET's status and headers, with the length of the body a GET would get, and no body.
    res.writeHead(result.status, { ...result.headers, "x-request-id": requestId, "content-length": String(Buffer.byteLength(result.body)) });
    res.end();
  };
}

// The one path segment between a prefix and a suffix (/api/vdc/<id>/action/...), decoded; null when the path is
// not of that form.
function idBetween(path: string, prefix: string, suffix: string): string | null {
  if (!path.startsWith(prefix) || !path.endsWith(suffix)) return null;
  const raw = path.slice(prefix.length, path.length - suffix.length);
  if (raw === "" || raw.includes("/")) return null;
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

// The body as text. Bytes that are not UTF-8 are refused, not replaced by U+FFFD as Buffer's decoding would: the
// document would not be the one sent. A byte order mark is dropped.
function utf8Text(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new XmlRefusal("the body is not UTF-8 text; send the XML document encoded as UTF-8");
  }
}

// Hrefs are made with the host the request was sent to (CONTRACT section 7), as the server's request listener
// checked it (request-target.ts).
function siteOf(req: NodeRequest): Site {
  return { base: `https://${requestAuthority(req.headers) ?? "localhost"}` };
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
