import { create } from "@bufbuild/protobuf";
import { InstantiateVAppTemplateRequestSchema } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import type { InstantiateVAppTemplateRequest } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import { VCLOUD_NS } from "./vcd-xml.js";
import { readXml, xmlBoolean } from "./vcd-xml-reader.js";
import { XmlRefusal } from "./xml-refusal.js";
import type { XmlElement } from "./vcd-xml-reader.js";

export const INSTANTIATE_PARAMS_TYPE = "application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml";
const OVF_NS = "http://schemas.dmtf.org/ovf/envelope/1";

// The children of InstantiateVAppTemplateParams in the order of VCD's schema (ParamsType, VAppCreationParamsType,
// InstantiateVAppParamsType, InstantiateVAppTemplateParamsType), and whether this server takes each one. Elements
// this server cannot honour are refused with a clear message rather than ignored.
const schemaOrder: readonly { name: string; repeated: boolean; supported: boolean }[] = [
  { name: "Description", repeated: false, supported: true },
  { name: "VAppParent", repeated: false, supported: false },
  { name: "InstantiationParams", repeated: false, supported: true },
  { name: "Source", repeated: false, supported: true },
  { name: "IsSourceDelete", repeated: false, supported: true },
  { name: "SourcedItem", repeated: true, supported: false },
  { name: "AllEULAsAccepted", repeated: false, supported: true },
  { name: "ComputePolicy", repeated: false, supported: false },
];

// Decodes an InstantiateVAppTemplateParams document into the request of VAppService.InstantiateVAppTemplate.
// What the document says is passed on as it is (a missing name or Source as empty): the domain checks the values,
// inside the pipeline, as it does for every protocol. Only what cannot be read as that document is refused here.
export function decodeInstantiateParams(body: string, serviceInstanceId: string): InstantiateVAppTemplateRequest {
  const root = readXml(body);
  if (root.ns !== VCLOUD_NS || root.name !== "InstantiateVAppTemplateParams") {
    throw new XmlRefusal(`the body must be an InstantiateVAppTemplateParams element of namespace ${VCLOUD_NS}, got ${root.name}${root.ns === "" ? " of no namespace" : ` of ${root.ns}`}`);
  }
  const children = inSchemaOrder(root);
  const request = create(InstantiateVAppTemplateRequestSchema, {
    serviceInstanceId,
    name: root.attributes.get("name") ?? "",
    // VCD's VAppCreationParamsType gives both attributes the default true: a document without them asks for a
    // deployed, powered-on vApp. (The proto's bools are false when absent; docs/vcd.md says why they differ.)
    deploy: xmlBoolean(root.attributes.get("deploy"), "the deploy attribute", true),
    powerOn: xmlBoolean(root.attributes.get("powerOn"), "the powerOn attribute", true),
  });
  const description = children.get("Description");
  if (description !== undefined) request.description = textOf(description);
  const params = children.get("InstantiationParams");
  if (params !== undefined) request.networkName = networkOf(params);
  const source = children.get("Source");
  if (source !== undefined) request.source = source.attributes.get("href") ?? "";
  if (xmlBoolean(textOf(children.get("IsSourceDelete")), "IsSourceDelete")) {
    throw new XmlRefusal("IsSourceDelete true is not supported: the templates of the platform catalog cannot be deleted");
  }
  request.allEulasAccepted = xmlBoolean(textOf(children.get("AllEULAsAccepted")), "AllEULAsAccepted");
  return request;
}

// The text of an element of a simple type (xs:string, xs:boolean). An element inside it is refused: reading only
// the text around it stored <Description>a<b>x</b>c</Description> as "ac".
function textOf(element: XmlElement): string;
function textOf(element: XmlElement | undefined): string | undefined;
function textOf(element: XmlElement | undefined): string | undefined {
  const child = element?.children[0];
  if (child !== undefined) throw new XmlRefusal(`${element!.name} takes text only; it holds the element ${child.name}`);
  return element?.text;
}

// The children by name, refusing unknown ones, ones out of the schema's order, and repeats.
function inSchemaOrder(root: XmlElement): Map<string, XmlElement> {
  const found = new Map<string, XmlElement>();
  let last = -1;
  for (const child of root.children) {
    const at = child.ns === VCLOUD_NS ? schemaOrder.findIndex((e) => e.name === child.name) : -1;
    if (at < 0) throw new XmlRefusal(`InstantiateVAppTemplateParams has no child element ${child.name}; allowed, in this order: ${schemaOrder.map((e) => e.name).join(", ")}`);
    const entry = schemaOrder[at]!;
    if (at < last) {
      throw new XmlRefusal(`${child.name} must come before ${schemaOrder[last]!.name} in InstantiateVAppTemplateParams; the schema's order is ${schemaOrder.map((e) => e.name).join(", ")}`);
    }
    if (at === last && !entry.repeated) throw new XmlRefusal(`InstantiateVAppTemplateParams holds ${child.name} twice`);
    if (!entry.supported) throw new XmlRefusal(`${child.name} is not supported by this server`);
    last = at;
    found.set(child.name, child);
  }
  return found;
}

// InstantiationParams/NetworkConfigSection/NetworkConfig: the networkName of the one org network to connect.
function networkOf(params: XmlElement): string {
  const sections = params.children;
  const other = sections.find((s) => s.ns !== VCLOUD_NS || s.name !== "NetworkConfigSection");
  if (other !== undefined) throw new XmlRefusal(`InstantiationParams may hold only a NetworkConfigSection; ${other.name} is not supported by this server`);
  if (sections.length > 1) throw new XmlRefusal("InstantiationParams holds NetworkConfigSection twice");
  const section = sections[0];
  if (section === undefined) return "";
  // ovf:Info, Link*, NetworkConfig*: the section's own order.
  let stage = 0;
  const configs: XmlElement[] = [];
  for (const child of section.children) {
    const at = child.ns === OVF_NS && child.name === "Info" ? 0 : child.ns === VCLOUD_NS && child.name === "Link" ? 1 : child.ns === VCLOUD_NS && child.name === "NetworkConfig" ? 2 : -1;
    if (at < 0) throw new XmlRefusal(`NetworkConfigSection has no child element ${child.name}; allowed, in this order: ovf:Info, Link, NetworkConfig`);
    if (at < stage) throw new XmlRefusal(`${child.name} is out of order in NetworkConfigSection; the schema's order is ovf:Info, Link, NetworkConfig`);
    stage = at;
    if (at === 2) configs.push(child);
  }
  if (configs.length > 1) throw new XmlRefusal("a vApp is connected to one org network here: give one NetworkConfig");
  const config = configs[0];
  if (config === undefined) return "";
  const name = config.attributes.get("networkName");
  if (name === undefined) throw new XmlRefusal("NetworkConfig needs a networkName attribute naming an org network of the vDC");
  return name;
}
