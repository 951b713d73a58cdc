"""Key management and node pool scenario over gRPC with Debian's python3-grpcio, from stubs that protoc and
grpc_python_plugin generated from proto/ (test/interop/python-interop.test.ts makes them and runs this).

    python3 scenario.py ADDRESS  (with CLOUDPLANE_TOKEN, CLOUDPLANE_SERVICE_INSTANCE, CLOUDPLANE_CLUSTER set
    and the generated stubs on PYTHONPATH)

Prints one line per step; errors are google.rpc.Status, decoded from grpc-status-details-bin.
"""

import os
import sys
import time

import grpc
from google.protobuf import duration_pb2

from compute.cluster.v1 import node_pool_pb2, node_pool_pb2_grpc, task_pb2, task_pb2_grpc
from google.rpc import code_pb2, error_details_pb2, status_pb2
from kms.v1 import kms_pb2, kms_pb2_grpc

DETAIL_TYPES = {
    "google.rpc.ErrorInfo": error_details_pb2.ErrorInfo,
    "google.rpc.BadRequest": error_details_pb2.BadRequest,
    "google.rpc.PreconditionFailure": error_details_pb2.PreconditionFailure,
    "google.rpc.ResourceInfo": error_details_pb2.ResourceInfo,
    "google.rpc.QuotaFailure": error_details_pb2.QuotaFailure,
    "google.rpc.RetryInfo": error_details_pb2.RetryInfo,
}


def describe_status(status):
    """One line for a google.rpc.Status: its code name, and every detail unpacked by its type URL."""
    parts = [code_pb2.Code.Name(status.code)]
    for any_detail in status.details:
        type_name = any_detail.type_url.split("/")[-1]
        detail = DETAIL_TYPES[type_name]()
        if not any_detail.Unpack(detail):
            raise SystemExit(f"cannot unpack {any_detail.type_url}")
        if type_name == "google.rpc.ErrorInfo":
            parts.append(f"ErrorInfo(reason={detail.reason}, domain={detail.domain})")
        elif type_name == "google.rpc.BadRequest":
            parts.append("BadRequest(" + ", ".join(v.field for v in detail.field_violations) + ")")
        elif type_name == "google.rpc.PreconditionFailure":
            parts.append("PreconditionFailure(" + ", ".join(v.type for v in detail.violations) + ")")
        elif type_name == "google.rpc.ResourceInfo":
            parts.append(f"ResourceInfo({detail.resource_type})")
        elif type_name == "google.rpc.QuotaFailure":
            parts.append(f"QuotaFailure({len(detail.violations)} violation)")
        else:
            parts.append(type_name)
    return " ".join(parts)


def status_of(error):
    """The google.rpc.Status of a failed call, from its grpc-status-details-bin trailer."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            if status.code != error.code().value[0]:
                raise SystemExit(f"grpc-status {error.code()} but details say {status.code}")
            return status
    raise SystemExit(f"{error.code()} without grpc-status-details-bin")


def expect_failure(what, call):
    try:
        call()
    except grpc.RpcError as error:
        print(f"{what}: {describe_status(status_of(error))}")
        return
    raise SystemExit(f"{what}: expected a failure")


def wait(tasks, metadata, service_instance, task):
    request = task_pb2.WaitTaskRequest(service_instance_id=service_instance, task_id=task.id, timeout=duration_pb2.Duration(seconds=30))
    done = tasks.WaitTask(request, metadata=metadata, timeout=60).task
    if not done.done:
        raise SystemExit(f"task {done.id} not done after WaitTask: {task_pb2.Task.Status.Name(done.status)}")
    return done


def main():
    address = sys.argv[1]
    metadata = (("authorization", "Bearer " + os.environ["CLOUDPLANE_TOKEN"]),)
    service_instance = os.environ["CLOUDPLANE_SERVICE_INSTANCE"]
    cluster = os.environ["CLOUDPLANE_CLUSTER"]
    with grpc.insecure_channel(address) as channel:
        kms = kms_pb2_grpc.KeyManagerServiceStub(channel)
        name = f"python-{int(time.time() * 1000):x}"
        key = kms.CreateCryptoKey(kms_pb2.CreateCryptoKeyRequest(parent_id="python", name=name), metadata=metadata)
        primary = key.primary
        print(f"created key {name}: primary version {primary.id} {kms_pb2.CryptoKeyVersion.State.Name(primary.state)} "
              f"{kms_pb2.CryptoKeyVersion.Algorithm.Name(primary.algorithm)}")

        aad = b"order-42"
        sealed = kms.Encrypt(kms_pb2.EncryptRequest(key_id=key.id, key_version_id=1, plaintext=b"hello from python",
                                                    additional_authenticated_data=aad), metadata=metadata)
        opened = kms.Decrypt(kms_pb2.DecryptRequest(key_id=key.id, ciphertext=sealed.ciphertext,
                                                    additional_authenticated_data=aad), metadata=metadata)
        print(f"encrypted {len(b'hello from python')} bytes into {len(sealed.ciphertext)}, decrypted with version "
              f"{opened.key_version_id}: {opened.plaintext.decode()}")

        version = kms.CreateCryptoKeyVersion(kms_pb2.CreateCryptoKeyVersionRequest(key_id=key.id), metadata=metadata)
        key = kms.UpdateCryptoKeyPrimaryVersion(
            kms_pb2.UpdateCryptoKeyPrimaryVersionRequest(key_id=key.id, key_version_id=version.id), metadata=metadata)
        kms.DisableCryptoKeyVersion(kms_pb2.DisableCryptoKeyVersionRequest(key_id=key.id, key_version_id=1), metadata=metadata)
        versions = kms.ListCryptoKeyVersions(kms_pb2.ListCryptoKeyVersionsRequest(key_id=key.id), metadata=metadata).versions
        print("versions: " + ", ".join(f"{v.id} {kms_pb2.CryptoKeyVersion.State.Name(v.state)}" for v in versions)
              + f"; primary {key.primary.id}")

        expect_failure("decrypt with disabled version 1", lambda: kms.Decrypt(
            kms_pb2.DecryptRequest(key_id=key.id, ciphertext=sealed.ciphertext, additional_authenticated_data=aad),
            metadata=metadata))
        expect_failure("disable the primary", lambda: kms.DisableCryptoKeyVersion(
            kms_pb2.DisableCryptoKeyVersionRequest(key_id=key.id, key_version_id=2), metadata=metadata))
        expect_failure("encrypt with version 0 and no plaintext", lambda: kms.Encrypt(
            kms_pb2.EncryptRequest(key_id=key.id, key_version_id=0), metadata=metadata))
        expect_failure("get an unknown key", lambda: kms.GetCryptoKey(kms_pb2.GetCryptoKeyRequest(key_id="no-such-key"),
                                                                     metadata=metadata))
        expect_failure("no credentials", lambda: kms.GetCryptoKey(kms_pb2.GetCryptoKeyRequest(key_id=key.id)))

        pools = node_pool_pb2_grpc.NodePoolServiceStub(channel)
        tasks = task_pb2_grpc.TaskServiceStub(channel)
        for pool_name, count in ((f"py-{int(time.time() * 1000) % 10**8:x}", 2), (f"pybig-{int(time.time() * 1000) % 10**8:x}", 20)):
            created = pools.CreateNodePool(node_pool_pb2.CreateNodePoolRequest(
                service_instance_id=service_instance, cluster_id=cluster, node_pool_name=pool_name,
                node_config=node_pool_pb2.NodeConfig(compute_flavor=os.environ["CLOUDPLANE_FLAVOR"]),
                scale_policy=node_pool_pb2.ScalePolicy(fixed_scale=node_pool_pb2.ScalePolicy.FixedScale(count=count))),
                metadata=metadata)
            done = wait(tasks, metadata, service_instance, created.task)
            meta = node_pool_pb2.NodePoolTaskMetadata()
            if not done.metadata.Unpack(meta):
                raise SystemExit(f"task metadata is {done.metadata.type_url}")
            line = f"task {done.command} of {count} nodes: {task_pb2.Task.Status.Name(done.status)}"
            if done.HasField("response"):
                pool = node_pool_pb2.NodePool()
                if not done.response.Unpack(pool):
                    raise SystemExit(f"task response is {done.response.type_url}")
                if pool.node_pool_id != meta.node_pool_id:
                    raise SystemExit("task metadata and response name different pools")
                state = node_pool_pb2.NodePool.State.Name(pool.state)
                line += f", pool {'named as asked' if pool.name == pool_name else 'misnamed ' + pool.name} {state}"
                deleted = pools.DeleteNodePool(node_pool_pb2.DeleteNodePoolRequest(
                    service_instance_id=service_instance, node_pool_id=pool.node_pool_id), metadata=metadata)
                gone = wait(tasks, metadata, service_instance, deleted.task)
                line += f"; {gone.command}: {task_pb2.Task.Status.Name(gone.status)}"
            if done.HasField("error"):
                line += f", error {describe_status(done.error)}"
            print(line)


if __name__ == "__main__":
    main()
