import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { adminAuth } from "../support/credentials.js";
import { withAuthorization } from "../support/kms-clients.js";

// What the compute e2e tests share: a catalog with numbers they reason about, a grpc-js client built at run time
// from the .proto files, and plain-fetch REST calls.

export const VDC = "vdc-a";
export const OTHER_VDC = "vdc-b";
// Holds 10 nodes, but one pool may ask for 20: asking for more than is free fails in the task, not at once.
export const CLUSTER = "cl-a1";
// Room for many pools of at most 8 nodes.
export const ROOMY_CLUSTER = "cl-a2";
export const FLAVOR = "cpu.small";
// An org network and a vApp template of VDC.
export const ORG_NETWORK = "net-a";
export const VAPP_TEMPLATE = "tpl-a";

export const testCatalog = {
  computeFlavors: [
    { id: FLAVOR, description: "2 vCPU, 8 GiB", cpu: 2, memoryGiB: 8, diskGiB: 50 },
    { id: "gpu.sold-out", cpu: 8, memoryGiB: 64, diskGiB: 200, gpu: 1, gpuModel: "V100", available: false },
  ],
  serviceInstances: [
    {
      id: VDC,
      name: "a",
      clusters: [
        { id: CLUSTER, name: "a1", capacity: 10, maxPoolSize: 20 },
        { id: ROOMY_CLUSTER, name: "a2", capacity: 1000, maxPoolSize: 8 },
      ],
      orgNetworks: [{ id: "net-a-id", name: ORG_NETWORK }],
      vAppTemplates: [{ id: VAPP_TEMPLATE, name: "template a" }],
    },
    { id: OTHER_VDC, name: "b", clusters: [{ id: "cl-b1", name: "b1", capacity: 4, maxPoolSize: 4 }] },
  ],
};

export function writeTestCatalog(dir: string): string {
  const path = join(dir, "catalog.json");
  writeFileSync(path, JSON.stringify(testCatalog));
  return path;
}

// --- grpc-js, from the .proto files -----------------------------------------------------------------------------

const packageDefinition = protoLoader.loadSync(
  ["compute/cluster/v1/node_pool.proto", "compute/cluster/v1/task.proto", "google/rpc/status.proto", "google/rpc/error_details.proto"],
  { includeDirs: ["proto"], enums: String, longs: String, defaults: false },
);

// Decodes a message packed in an Any (or carried in grpc-status-details-bin) by its type URL, with the message
// types proto-loader read from the .proto files. The result has the shape proto-loader gives every message; it is
// plain data, so the tests treat it as JSON.
export function decodeAny(typeUrl: string, value: Uint8Array): JsonObject {
  const definition = packageDefinition[typeUrl.replace("type.googleapis.com/", "")];
  if (definition === undefined || definition.format !== "Protocol Buffer 3 DescriptorProto") throw new Error(`unknown message type ${typeUrl}`);
  return (definition as protoLoader.MessageTypeDefinition<object, object>).deserialize(Buffer.from(value)) as JsonObject;
}

// Shapes of the compute messages as @grpc/proto-loader decodes them with the options above.
// protobufjs keeps the proto name of Any's type_url, even with camelCase names elsewhere.
export interface GrpcAny {
  type_url: string;
  value: Buffer;
}

export function unpack(any: GrpcAny | undefined): JsonObject {
  if (any === undefined) throw new Error("no Any to unpack");
  return decodeAny(any.type_url, any.value);
}

export interface GrpcStatus {
  code: number;
  message: string;
  details?: GrpcAny[];
}

export interface GrpcTask {
  id: string;
  command: string;
  status: "PENDING" | "RUNNING" | "SUCCEEDED" | "FAILED";
  createdBy: string;
  serviceInstanceId: string;
  error?: GrpcStatus;
  metadata?: GrpcAny;
  response?: GrpcAny;
  done?: boolean;
}

export interface GrpcNodePool {
  nodePoolId: string;
  clusterId: string;
  name: string;
  nodeConfig: { computeFlavor: string };
  scalePolicy: { fixedScale: { count?: number } };
  state: string;
}

// A failed call: its status and the details from grpc-status-details-bin, each decoded and marked with "@type".
export interface GrpcFailure {
  code: number;
  message: string;
  details: JsonObject[];
}

export class ComputeGrpcClient {
  private readonly client: grpc.Client;

  constructor(port: number) {
    this.client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
      interceptors: [withAuthorization(adminAuth(`127.0.0.1:${port}`).authorization)],
    });
  }

  call<Response>(service: "NodePoolService" | "TaskService", method: string, request: object): Promise<Response> {
    const definition = (packageDefinition[`compute.cluster.v1.${service}`] as protoLoader.ServiceDefinition)[method];
    if (definition === undefined) throw new Error(`no method ${service}.${method}`);
    return new Promise((resolve, reject) => {
      this.client.makeUnaryRequest(
        definition.path,
        definition.requestSerialize,
        // The loaded definitions are untyped; the interfaces above describe them.
        (bytes: Buffer) => definition.responseDeserialize(bytes) as Response,
        request,
        (error, response) => (error !== null || response === undefined ? reject(error) : resolve(response)),
      );
    });
  }

  // The failure of a call that is expected to fail.
  async failure(service: "NodePoolService" | "TaskService", method: string, request: object): Promise<GrpcFailure> {
    try {
      await this.call(service, method, request);
    } catch (err) {
      if (!(err instanceof Error) || !("metadata" in err) || !(err.metadata instanceof grpc.Metadata)) throw err;
      const [bin] = err.metadata.get("grpc-status-details-bin");
      if (!(bin instanceof Buffer)) throw new Error("no grpc-status-details-bin");
      const status = decodeAny("type.googleapis.com/google.rpc.Status", bin) as unknown as GrpcStatus;
      const details = (status.details ?? []).map((d) => ({ "@type": d.type_url, ...unpack(d) }));
      return { code: status.code, message: status.message, details };
    }
    throw new Error(`${service}.${method} succeeded`);
  }

  close(): void {
    this.client.close();
  }
}

// --- REST ------------------------------------------------------------------------------------------------------

export interface RestResponse {
  status: number;
  json: JsonObject;
}

export async function rest(baseUrl: string, method: string, path: string, body?: JsonValue): Promise<RestResponse> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { ...adminAuth(baseUrl), ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as JsonObject };
}

// The details of a REST error body, {"typeUrl", "value"} each, decoded and marked with "@type".
export function restDetails(body: JsonObject): JsonObject[] {
  return (body.details as { typeUrl: string; value: string }[]).map((d) => ({
    "@type": d.typeUrl,
    ...decodeAny(d.typeUrl, Buffer.from(d.value, "base64")),
  }));
}

// The node pool id in the metadata of a task as REST renders it.
export function restNodePoolId(task: JsonObject): string {
  const metadata = task.metadata as { typeUrl: string; value: string };
  return String(decodeAny(metadata.typeUrl, Buffer.from(metadata.value, "base64")).nodePoolId);
}

export function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64");
}
