import type { Logger } from "pino";
import type { AccessPolicy } from "../identity/access-policy.js";
import type { AuditTrail } from "../identity/audit-trail.js";
import type { Authenticator } from "../identity/authenticator.js";
import type { Clock } from "../shared/clock.js";
import type { Stage } from "./stage.js";
import { auditStage } from "./stages/audit.js";
import { authenticationStage } from "./stages/authentication.js";
import { authorizationStage } from "./stages/authorization.js";
import type { KeyScopes, VAppScopes } from "./stages/authorization.js";
import { credentialsStage } from "./stages/credentials.js";
import { deadlineStage } from "./stages/deadline.js";
import { errorsAndLogStage } from "./stages/errors-and-log.js";
import { metricsStage } from "./stages/metrics.js";
import type { CallTallies } from "../metrics/call-tally.js";
import { rateLimitStage } from "./stages/rate-limit.js";
import type { RateLimitSettings } from "./stages/rate-limit.js";
import { requestIdStage } from "./stages/request-id.js";
import { shutdownStage } from "./stages/shutdown.js";

// all: every stage. none: no stage at all; no-access: every stage but authentication and authorization (every
// caller is "anonymous" with every permission). The last two are for benchmarks only, to measure what the stages
// cost; main.ts warns loudly when either is set.
export type StageMode = "all" | "none" | "no-access";

export interface StageSettings {
  logger: Logger;
  clock: Clock;
  // The longest a call may run, whatever deadline its caller set (methods that wait by design excepted).
  maxCallMs: number;
  mode: StageMode;
  // What authentication and authorization read; null only in mode no-access or none.
  access: { authenticator: Authenticator; policy: AccessPolicy; keyScopes: KeyScopes; vappScopes: VAppScopes } | null;
  audit: AuditTrail;
  // Where the metrics stage counts calls; null when metrics are off (METRICS=off).
  metrics: CallTallies | null;
  rateLimits: RateLimitSettings;
  // Aborted when the server begins to shut down: calls arriving from then on are refused.
  draining: AbortSignal;
  // Tests only: stages run last, just before the handler (a probe that records every call).
  extra: readonly Stage[];
}

// The call pipeline: every call, whatever its protocol, runs through these stages in this order before its
// handler. This list is the one place where a concern of every call is added.
export function pipelineStages(settings: StageSettings): Stage[] {
  if (settings.mode === "none") return [...settings.extra];
  const access = settings.mode === "all" ? settings.access : null;
  if (settings.mode === "all" && access === null) throw new Error("the access stages need an authenticator and an access policy");
  return [
    requestIdStage,
    // Outside the errors stage, so that it counts every failure by the code the caller gets.
    ...(settings.metrics !== null ? [metricsStage(settings.metrics)] : []),
    // Outside everything after it, so that a failure of any later stage is mapped and logged like the handler's.
    errorsAndLogStage(settings.logger),
    shutdownStage(settings.draining),
    deadlineStage(settings.maxCallMs),
    credentialsStage,
    ...(access !== null ? [authenticationStage(access.authenticator)] : []),
    // After authentication, which established whose budget the call draws from.
    rateLimitStage(settings.rateLimits),
    // Outside the access check, so that refusals by it are recorded with the principal who was refused.
    auditStage(settings.audit, settings.clock),
    ...(access !== null ? [authorizationStage(access.policy, access.keyScopes, access.vappScopes)] : []),
    ...settings.extra,
  ];
}
