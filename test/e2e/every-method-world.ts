import { create } from "@bufbuild/protobuf";
import type { DescMethod, MessageShape } from "@bufbuild/protobuf";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { NodePoolService } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { TaskService } from "../../gen/compute/cluster/v1/task_pb.js";
import { VAppService } from "../../gen/compute/vapp/v1/vapp_pb.js";
import { adminAuth } from "../support/credentials.js";
import type { TestServer } from "../support/server.js";
import { wireCall } from "../support/wire-call.js";
import { CLUSTER, FLAVOR, ORG_NETWORK, VAPP_TEMPLATE, VDC } from "./compute-helpers.js";

// Resources that the request of every method can name, made as the admin through the API on a server started with
// the test catalog (compute-helpers.ts): a key with two versions and a ciphertext in namespace `ns`, a node pool of
// VDC and the task that made it, a vApp and its task. The tests generated from the descriptors call every method
// with `requestFor`, so that nothing but these values is listed by hand.
export interface MethodWorld {
  // Request field values by proto name.
  readonly values: Readonly<Record<string, unknown>>;
  // The request of a method: every top-level field whose proto name the world knows.
  requestFor(m: DescMethod): MessageShape<DescMethod["input"]>;
}

export const nameOf = (m: DescMethod): string => `${m.parent.typeName}/${m.name}`;

export async function adminCall<T>(server: TestServer, m: DescMethod, init: object): Promise<T> {
  const answer = await wireCall(server.url, "grpc", m, init as never, adminAuth(server.url));
  if (answer.code !== 0) throw new Error(`${m.name} as admin: ${answer.code} ${answer.message}`);
  return answer.response as T;
}

export async function buildMethodWorld(server: TestServer, ns: string): Promise<MethodWorld> {
  const admin = <T>(m: DescMethod, init: object): Promise<T> => adminCall<T>(server, m, init);
  const kms = KeyManagerService.method;
  const key = await admin<{ id: string }>(kms.createCryptoKey, { parentId: ns, name: "target" });
  await admin(kms.createCryptoKeyVersion, { keyId: key.id });
  const { ciphertext } = await admin<{ ciphertext: string }>(kms.encrypt, { keyId: key.id, keyVersionId: 1, plaintext: new TextEncoder().encode("p") });
  const { task } = await admin<{ task: { id: string } }>(NodePoolService.method.createNodePool, {
    serviceInstanceId: VDC,
    clusterId: CLUSTER,
    nodeConfig: { computeFlavor: FLAVOR },
    nodePoolName: "target-pool",
    scalePolicy: { fixedScale: { count: 1 } },
  });
  const done = await admin<{ task: { status: string; response: { nodePoolId: string } } }>(TaskService.method.waitTask, {
    serviceInstanceId: VDC,
    taskId: task.id,
    timeout: { seconds: 30n },
  });
  if (done.task.status !== "SUCCEEDED") throw new Error(`the node pool was not made: ${JSON.stringify(done)}`);
  const vapp = await admin<{ id: string; tasks: { id: string }[] }>(VAppService.method.instantiateVAppTemplate, {
    serviceInstanceId: VDC,
    name: "target-vapp",
    source: VAPP_TEMPLATE,
    networkName: ORG_NETWORK,
  });
  const values: Record<string, unknown> = {
    parent_id: ns,
    key_id: key.id,
    key_version_id: 2,
    name: "new-key",
    key: { id: key.id, description: "changed" },
    update_mask: { paths: ["description"] },
    plaintext: new TextEncoder().encode("secret"),
    ciphertext: Buffer.from(ciphertext, "base64"),
    service_instance_id: VDC,
    cluster_id: CLUSTER,
    node_pool_id: done.task.response.nodePoolId,
    node_pool_name: "new-pool",
    node_config: { computeFlavor: FLAVOR },
    scale_policy: { fixedScale: { count: 2 } },
    task_id: task.id,
    timeout: { seconds: 1n },
    vapp_id: vapp.id,
    source: VAPP_TEMPLATE,
    network_name: ORG_NETWORK,
    cluster_type: "MT",
  };
  // Fields whose proto name two methods share with different meanings, by method: the task of GetVAppTask is a vApp's.
  const valuesOf: Record<string, Record<string, unknown>> = {
    "compute.vapp.v1.VAppService/GetVAppTask": { task_id: vapp.tasks[0]!.id },
  };
  return {
    values,
    requestFor(m) {
      if (m.input.typeName === "grpc.reflection.v1.ServerReflectionRequest" || m.input.typeName === "grpc.reflection.v1alpha.ServerReflectionRequest") {
        return create(m.input, { messageRequest: { case: "listServices", value: "" } } as never);
      }
      const init: Record<string, unknown> = {};
      const given = { ...values, ...valuesOf[nameOf(m)] };
      for (const field of m.input.fields) if (field.name in given) init[field.localName] = given[field.name];
      return create(m.input, init as never);
    },
  };
}
