import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminCredentials } from "../support/credentials.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// POST /api/sessions, the virtualization API's login (CONTRACT section 7): Basic credentials of a service account
// for a Bearer token in X-VMWARE-VCLOUD-ACCESS-TOKEN, and VCD Error documents for every refusal.

let server: TestServer;
let basic: string;

beforeAll(async () => {
  server = await startServer({ env: { AUTH_FAILURES_PER_MINUTE: "2" } });
  const admin = adminCredentials(server.dataDir);
  basic = `Basic ${Buffer.from(`${admin.client_id}@System:${admin.client_secret}`).toString("base64")}`;
});
afterAll(() => server.stop());

function post(headers: Record<string, string>, method = "POST"): Promise<Response> {
  return fetch(`${server.url}/api/sessions`, { method, headers });
}

const error = (status: number, minor: string, message: string, reason?: string): string =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<Error xmlns="http://www.vmware.com/vcloud/v1.5" majorErrorCode="${status}" minorErrorCode="${minor}" message="${message}"${reason === undefined ? "" : ` vendorSpecificErrorCode="${reason}"`}/>`;

describe("POST /api/sessions", () => {
  it("answers a token that authenticates every other call, and a Session document", async () => {
    const res = await post({ authorization: basic, accept: "application/*+xml;version=38.0" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/vnd.vmware.vcloud.session+xml;version=38.0");
    expect(res.headers.get("x-vmware-vcloud-token-type")).toBe("Bearer");
    const token = res.headers.get("x-vmware-vcloud-access-token") ?? "";
    expect(token).toMatch(/^cpat\./);
    expect(await res.text()).toContain('<Session xmlns="http://www.vmware.com/vcloud/v1.5" user="');
    const keys = await fetch(`${server.url}/v1/keys?parentId=vcd`, { headers: { authorization: `Bearer ${token}` } });
    expect(keys.status).toBe(200);
  });

  it("refuses a missing or unsupported version with 406, listing the supported ones", async () => {
    for (const accept of [undefined, "application/*;version=1.5"]) {
      const res = await post({ authorization: basic, ...(accept === undefined ? {} : { accept }) });
      expect(res.status).toBe(406);
      expect(await res.text()).toBe(
        error(406, "NOT_ACCEPTABLE", "send Accept: application/*;version=&lt;v&gt; with a supported version: 36.0, 36.1, 36.2, 36.3, 37.0, 37.1, 37.2, 37.3, 38.0, 38.1", "PROTOCOL_ERROR"),
      );
    }
  });

  it("refuses other methods with 405 and an Allow header", async () => {
    const res = await post({ accept: "application/*;version=38.0" }, "GET");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    expect(res.headers.get("content-type")).toBe("application/vnd.vmware.vcloud.error+xml;version=38.0");
    expect(await res.text()).toBe(error(405, "METHOD_NOT_ALLOWED", "/api/sessions takes POST", "METHOD_NOT_ALLOWED"));
  });

  it("refuses missing, malformed and wrong Basic credentials with 401, then 429 with Retry-After once they failed too often", async () => {
    const accept = { accept: "application/*;version=38.0" };
    const missing = await post(accept);
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe('Basic realm="cloudplane"');
    expect(missing.headers.get("content-type")).toBe("application/vnd.vmware.vcloud.error+xml;version=38.0");
    expect(await missing.text()).toBe(error(401, "UNAUTHORIZED", "POST /api/sessions needs Authorization: Basic base64(&lt;client id&gt;[@&lt;org&gt;]:&lt;client secret&gt;)", "UNAUTHENTICATED"));
    const wrong = { ...accept, authorization: `Basic ${Buffer.from("sa-nobody:wrong").toString("base64")}` };
    for (let i = 0; i < 2; i++) {
      const res = await post(wrong);
      expect(res.status).toBe(401);
      expect(await res.text()).toBe(error(401, "UNAUTHORIZED", "client_id or client_secret is wrong, or the service account was revoked", "UNAUTHENTICATED"));
    }
    const limited = await post(wrong);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await limited.text()).toContain('majorErrorCode="429" minorErrorCode="TOO_MANY_REQUESTS"');
  });
});
