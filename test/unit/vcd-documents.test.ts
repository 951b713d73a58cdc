import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { VAppTask_Status, VAppTaskSchema } from "../../gen/compute/vapp/v1/vapp_pb.js";
import { vappTaskToProto } from "../../src/compute/vapps/vapp-to-proto.js";
import { SaxesParser } from "saxes";
import { taskDocument } from "../../src/transport/vcd/vcd-documents.js";
import { errorDocument } from "../../src/transport/vcd/vcd-xml.js";

describe("the Task document", () => {
  it("of a failed task carries its google.rpc.Status as an Error element, between Owner and User", () => {
    const task = vappTaskToProto({
      id: "t1",
      command: "InstantiateVAppTemplate",
      status: "error",
      vappId: "v1",
      vappName: "web",
      serviceInstanceId: "vdc",
      createdBy: "principal-1",
      createdAt: Date.UTC(2026, 10, 23, 12, 0, 0),
      endedAt: Date.UTC(2026, 10, 23, 12, 0, 1),
      failure: { kind: "internal" },
      attempts: 1,
    });
    expect(task.status).toBe(VAppTask_Status.ERROR);
    expect(taskDocument({ base: "https://site" }, task)).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
        '<Task xmlns="http://www.vmware.com/vcloud/v1.5" status="error" startTime="2026-11-23T12:00:00.000Z" endTime="2026-11-23T12:00:01.000Z" ' +
        'serviceNamespace="com.vmware.vcloud" operationName="vdcInstantiateVapp" operation="Creating Virtual Application web(v1)" cancelRequested="false" ' +
        'name="task" id="urn:vcloud:task:t1" href="https://site/api/task/t1" type="application/vnd.vmware.vcloud.task+xml">' +
        '<Owner href="https://site/api/vApp/vapp-v1" name="web" type="application/vnd.vmware.vcloud.vApp+xml"/>' +
        '<Error majorErrorCode="500" minorErrorCode="INTERNAL_SERVER_ERROR" message="internal error while running task t1; quote the task id when reporting it" vendorSpecificErrorCode="INTERNAL"/>' +
        '<User name="principal-1" type="application/vnd.vmware.admin.user+xml"/><Progress>100</Progress></Task>',
    );
  });

  it("of a running task has no endTime and Progress 0", () => {
    const running = create(VAppTaskSchema, { id: "t2", status: VAppTask_Status.RUNNING, vappId: "v", vappName: "n", operationName: "vdcInstantiateVapp", operation: "o", startTime: timestampFromMs(0) });
    const doc = taskDocument({ base: "https://site" }, running);
    expect(doc).toContain('status="running" startTime="1970-01-01T00:00:00.000Z" serviceNamespace');
    expect(doc).toContain("<Progress>0</Progress>");
    expect(doc).not.toContain("endTime");
  });
});

// The builder escapes markup but wrote a character XML 1.0 forbids as it is, and the document was then no XML to the
// caller's parser (a raw ESC in a 403's message: a probe, 2026-11-28).
describe("every document written", () => {
  it("is well-formed XML whatever its values hold: forbidden characters as \\uXXXX", () => {
    const xml = errorDocument(403, "ACCESS_TO_RESOURCE_IS_FORBIDDEN", "a\u001bb\u0000c\ud800d\u{1F600}e\uFFFEf<g&h");
    const errors: string[] = [];
    const parser = new SaxesParser({ xmlns: true });
    let message = "";
    parser.on("error", (err) => errors.push(err.message));
    parser.on("opentag", (tag) => (message = String((tag.attributes["message"] as { value: string }).value)));
    parser.write(xml).close();
    expect(errors).toEqual([]);
    expect(message).toBe("a\\u001bb\\u0000c\\ud800d\u{1F600}e\\ufffef<g&h");
  });
});
