import type { Logger } from "pino";
import type { Stage } from "./stage.js";
import { credentialsStage } from "./stages/credentials.js";
import { deadlineStage } from "./stages/deadline.js";
import { errorsAndLogStage } from "./stages/errors-and-log.js";
import { requestIdStage } from "./stages/request-id.js";

export interface StageSettings {
  logger: Logger;
  // The longest a call may run, whatever deadline its caller set (methods that wait by design excepted).
  maxCallMs: number;
  // Benchmarks only: the adapters with no stages at all, to measure what the stages cost.
  withoutStages: boolean;
  // Tests only: stages run last, just before the handler (a probe that records every call).
  extra: readonly Stage[];
}

// The call pipeline: every call, whatever its protocol, runs through these stages in this order before its
// handler. This list is the one place where a concern of every call is added.
export function pipelineStages(settings: StageSettings): Stage[] {
  if (settings.withoutStages) return [...settings.extra];
  return [
    requestIdStage,
    // Outside everything after it, so that a failure of any later stage is mapped and logged like the handler's.
    errorsAndLogStage(settings.logger),
    deadlineStage(settings.maxCallMs),
    credentialsStage,
    ...settings.extra,
  ];
}
