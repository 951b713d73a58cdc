import { alreadyExists, invalidArgument, notFound } from "../../errors/domain-error.js";
import type { DomainError } from "../../errors/domain-error.js";
import type { FieldViolation } from "../../errors/domain-error.js";

// The errors of the vApp domain, in one place. The virtualization API renders them as its Error documents
// (src/transport/vcd/vcd-errors.ts): INVALID_REFERENCE keeps its name as minorErrorCode there.

const VAPP = "compute.vapp.v1.VApp";
const VAPP_TASK = "compute.vapp.v1.VAppTask";

// A template or network the request names that does not exist (or not where it must).
export function invalidReferences(violations: readonly FieldViolation[]): DomainError {
  return invalidArgument("compute", violations, "INVALID_REFERENCE");
}

export function eulaNotAccepted(templateId: string): DomainError {
  return invalidArgument(
    "compute",
    [{ field: "allEulasAccepted", description: `vApp template ${templateId} has EULAs: accept them (AllEULAsAccepted true) to instantiate it` }],
    "EULA_NOT_ACCEPTED",
  );
}

export function vappNameTaken(serviceInstanceId: string, name: string, holderId: string): DomainError {
  return alreadyExists(
    "compute",
    "VAPP_NAME_TAKEN",
    { resourceType: VAPP, resourceName: holderId, owner: serviceInstanceId },
    `vDC ${serviceInstanceId} already has a vApp named ${JSON.stringify(name)} (vApp ${holderId})`,
  );
}

export function vappNotFound(vappId: string): DomainError {
  return notFound("compute", "VAPP_NOT_FOUND", { resourceType: VAPP, resourceName: vappId }, `vApp ${vappId} not found`);
}

export function vappTaskNotFound(taskId: string): DomainError {
  return notFound("compute", "VAPP_TASK_NOT_FOUND", { resourceType: VAPP_TASK, resourceName: taskId }, `task ${taskId} not found`);
}
