import { setMaxListeners } from "node:events";
import type { Logger } from "pino";
import { failureLevel, isStoreUnavailable } from "../../errors/store-unavailable.js";
import type { Clock } from "../../shared/clock.js";
import { LogBudget } from "../../shared/log-budget.js";
import type { QueuedTask, TaskQueue } from "../../storage/task-queue.js";

export interface TaskWorkerSettings {
  // Unique per process and start, so that a restarted server never mistakes a dead worker's tasks for its own.
  workerId: string;
  // Tasks run at the same time; each mostly waits on its provider.
  concurrency: number;
  // How often the worker proves it is alive and looks for tasks that other processes added or left behind.
  heartbeatMs: number;
  // A worker silent for this long is taken for dead, and its RUNNING tasks are resumed by another.
  leaseMs: number;
}

// Takes stored tasks and runs them. Claims are atomic in the store, so a task is run by one worker at a time; a
// task whose worker died (no heartbeat within the lease) is claimed again and resumed, which is why the work it
// does must be idempotent. One worker per process for every kind of task (node pool and vApp tasks, through
// combined-queue.ts).
// A task whose run failed is run again by its worker after this long, doubled with each failure up to the maximum.
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 60_000;

interface Retry<T> {
  task: T;
  due: number;
  delayMs: number;
}

export class TaskWorker<T extends QueuedTask> {
  private readonly running = new Set<Promise<void>>();
  // Tasks whose run failed (the store or the provider failing for a moment: a full disk, a dropped connection). The
  // worker still holds their claims, which no other worker takes while its heartbeat is fresh, so it runs them again
  // itself: they stayed RUNNING, their pools locked against every change, until the server restarted (two probes,
  // 2026-11-28). Their work is idempotent, as for a task resumed after a crash.
  private readonly retries: Retry<T>[] = [];
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private started = false;
  private stopped = false;
  private lastBeat = Number.NEGATIVE_INFINITY;
  private filling: Promise<void> | null = null;
  private refill = false;
  private readonly storeNotices = new LogBudget(10);

  constructor(
    private readonly store: TaskQueue<T>,
    private readonly execute: (task: T, workerId: string, signal: AbortSignal) => Promise<void>,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly settings: TaskWorkerSettings,
  ) {
    // Every running task listens on the one stop signal, often more than once (a provider's timers); that is not
    // a leak, so Node's warning above 10 listeners does not apply.
    setMaxListeners(0, this.abort.signal);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.timer = setInterval(() => this.kick(), this.settings.heartbeatMs);
    this.timer.unref();
    this.kick();
  }

  // Looks for work now: a task was stored, a slot came free, or the heartbeat is due. Calls never overlap; one
  // that comes in during a pass makes another pass follow.
  kick(): void {
    if (!this.started || this.stopped) return;
    if (this.filling !== null) {
      this.refill = true;
      return;
    }
    this.filling = this.fill()
      .catch((err: unknown) => {
        // Once a second while the store is out: at most ten lines a minute of that.
        if (isStoreUnavailable(err) && !this.storeNotices.take()) return;
        this.logger[failureLevel(err)]({ err }, "task worker could not take tasks; trying again at the next heartbeat");
      })
      .finally(() => {
        this.filling = null;
        if (this.refill) {
          this.refill = false;
          this.kick();
        }
      });
  }

  private async fill(): Promise<void> {
    // The heartbeat is written before any claim, so the store never sees this worker's tasks as orphans. Half the
    // interval: a timer that fires a little early must not skip a beat. A clock that stepped back beats at once: the
    // time since the last beat read negative, and no beat was written for as long as the step (a probe, 2026-11-28).
    const sinceBeat = this.clock.now() - this.lastBeat;
    if (sinceBeat >= this.settings.heartbeatMs / 2 || sinceBeat < 0) {
      const now = this.clock.now();
      await this.store.heartbeat(this.settings.workerId, now, now - this.settings.leaseMs);
      this.lastBeat = now;
    }
    this.runDueRetries();
    while (!this.stopped && this.running.size < this.settings.concurrency) {
      const now = this.clock.now();
      const task = await this.store.claimTask(this.settings.workerId, now, now - this.settings.leaseMs);
      if (task === null) return;
      if (task.attempts > 1) this.logger.info({ taskId: task.id, command: task.command, attempt: task.attempts }, "resuming unfinished task");
      this.run(task, RETRY_FIRST_MS);
    }
  }

  // The failed runs whose time has come, as far as slots are free. A clock that stepped back makes them due at once.
  private runDueRetries(): void {
    const now = this.clock.now();
    for (let i = 0; i < this.retries.length && !this.stopped && this.running.size < this.settings.concurrency; ) {
      const retry = this.retries[i]!;
      if (now < retry.due && now >= retry.due - retry.delayMs) {
        i++;
        continue;
      }
      this.retries.splice(i, 1);
      this.run(retry.task, Math.min(RETRY_MAX_MS, retry.delayMs * 2));
    }
  }

  // Runs a claimed task; if the run fails, it is run again after `retryMs`.
  private run(task: T, retryMs: number): void {
    const run: Promise<void> = this.execute(task, this.settings.workerId, this.abort.signal)
      .catch((err: unknown) => {
        this.logger[failureLevel(err)]({ err, taskId: task.id, retryInSeconds: retryMs / 1000 }, "task run failed; this server runs it again");
        this.retries.push({ task, due: this.clock.now() + retryMs, delayMs: retryMs });
      })
      .finally(() => {
        this.running.delete(run);
        this.kick();
      });
    this.running.add(run);
  }

  // Stops taking tasks, asks the running ones to stop at a safe point, waits for them, and gives up the claims so
  // that the next start resumes them at once.
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.abort.abort();
    await this.filling;
    await Promise.all(this.running);
    if (this.started) await this.store.retireWorker(this.settings.workerId);
  }
}
