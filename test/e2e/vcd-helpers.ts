import { XMLParser } from "fast-xml-parser";

// A virtualization API client as scripts write one: raw HTTP with XML bodies, Accept with a version, and a Bearer
// token. Answers are parsed with fast-xml-parser (attributes prefixed "@_") for the assertions that need values.

export const ACCEPT = "application/*+xml;version=38.0";
export const INSTANTIATE_TYPE = "application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml";
export const VCLOUD = "http://www.vmware.com/vcloud/v1.5";

// The shipped catalog (catalog/default-catalog.json).
export const MOSCOW = "6f1c2a4e-3b7d-4e59-9a0c-8d2f1e3b5a71";
export const SPB = "9d3e5f7a-8b1c-4d2e-a6f0-5c7b9e1d3f82";
export const UBUNTU = "c2d4f6a8-1b3e-4d5f-8a7c-9e0b2d4f6a81";
export const CENTOS = "f9e7d5c3-a1b2-4c3d-9e8f-7a6b5c4d3e21";
export const DEBIAN = "3b5d7f9a-2c4e-4a6b-8d0f-1e3a5c7e9b02";

export interface XmlResponse {
  status: number;
  headers: Headers;
  text: string;
  // The parsed document's root element.
  doc: Record<string, unknown>;
}

const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "@_", parseAttributeValue: false, parseTagValue: false, isArray: (name) => ["Link", "VAppTemplateRecord", "Task"].includes(name) });

export async function vcd(url: string, path: string, init: { method?: string; token?: string | null; accept?: string | null; contentType?: string; body?: string } = {}): Promise<XmlResponse> {
  const headers: Record<string, string> = {};
  if (init.token !== null && init.token !== undefined) headers.authorization = `Bearer ${init.token}`;
  if (init.accept !== null) headers.accept = init.accept ?? ACCEPT;
  if (init.contentType !== undefined) headers["content-type"] = init.contentType;
  const res = await fetch(`${url}${path}`, { method: init.method ?? "GET", headers, body: init.body });
  const text = await res.text();
  const parsed = (text === "" ? {} : parser.parse(text)) as Record<string, unknown>;
  const root = Object.keys(parsed).find((k) => k !== "?xml");
  return { status: res.status, headers: res.headers, text, doc: root === undefined ? {} : { [root]: parsed[root] } };
}

// The host part of hrefs for requests sent to `url`.
export function site(url: string): string {
  return `https://${new URL(url).host}`;
}

export function templateHref(url: string, id: string): string {
  return `${site(url)}/api/vAppTemplate/vappTemplate-${id}`;
}

export interface ParamsInput {
  name?: string | null;
  // Written false unless given; null leaves the attribute out.
  deploy?: boolean | null;
  powerOn?: boolean | null;
  description?: string;
  network?: string | null;
  source?: string | null;
  eula?: boolean;
}

// An InstantiateVAppTemplateParams document as VCD's documentation shows it.
export function instantiateParams(p: ParamsInput): string {
  const attrs = [
    `xmlns="${VCLOUD}"`,
    `xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"`,
    ...(p.name === null ? [] : [`name="${p.name ?? "web-1"}"`]),
    ...(p.deploy === null ? [] : [`deploy="${p.deploy ?? false}"`]),
    ...(p.powerOn === null ? [] : [`powerOn="${p.powerOn ?? false}"`]),
  ].join(" ");
  const description = p.description === undefined ? "" : `<Description>${p.description}</Description>`;
  const network =
    p.network === null
      ? ""
      : `<InstantiationParams><NetworkConfigSection><ovf:Info>Configuration parameters for logical networks</ovf:Info>` +
        `<NetworkConfig networkName="${p.network ?? "org-net-default"}"><Configuration><FenceMode>bridged</FenceMode></Configuration></NetworkConfig>` +
        `</NetworkConfigSection></InstantiationParams>`;
  const source = p.source === null ? "" : `<Source href="${p.source}"/>`;
  const eula = p.eula === undefined ? "" : `<AllEULAsAccepted>${p.eula}</AllEULAsAccepted>`;
  return `<?xml version="1.0" encoding="UTF-8"?>\n<InstantiateVAppTemplateParams ${attrs}>${description}${network}${source}${eula}</InstantiateVAppTemplateParams>`;
}

export function instantiate(url: string, token: string, vdc: string, body: string, contentType = INSTANTIATE_TYPE): Promise<XmlResponse> {
  return vcd(url, `/api/vdc/${vdc}/action/instantiateVAppTemplate`, { method: "POST", token, contentType, body });
}

export function attr(element: unknown, name: string): string | undefined {
  return (element as Record<string, string> | undefined)?.[`@_${name}`];
}

// The Error document a refusal must be, exactly, with the reason as vendorSpecificErrorCode when there is one.
export function errorXml(status: number, minor: string, message: string, reason?: string): string {
  const escaped = message.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;").replaceAll("'", "&apos;");
  const vendor = reason === undefined ? "" : ` vendorSpecificErrorCode="${reason}"`;
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error xmlns="${VCLOUD}" majorErrorCode="${status}" minorErrorCode="${minor}" message="${escaped}"${vendor}/>`;
}
