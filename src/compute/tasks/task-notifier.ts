// Wakes the callers waiting on a task (WaitTask) when a worker of this process finishes it. It carries no data:
// a woken waiter reads the task from the store, which stays the one source of truth.
export class TaskNotifier {
  private readonly waiters = new Map<string, Set<() => void>>();
  private closed = false;

  // Calls `wake` once the task is finished or the notifier is closed. Returns the function that cancels this.
  subscribe(taskId: string, wake: () => void): () => void {
    if (this.closed) {
      wake();
      return () => {};
    }
    let set = this.waiters.get(taskId);
    if (set === undefined) {
      set = new Set();
      this.waiters.set(taskId, set);
    }
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.waiters.get(taskId) === set) this.waiters.delete(taskId);
    };
  }

  notify(taskId: string): void {
    const set = this.waiters.get(taskId);
    this.waiters.delete(taskId);
    for (const wake of set ?? []) wake();
  }

  // The server is stopping: every waiter answers now with the task as it is, and so does every later one.
  close(): void {
    this.closed = true;
    const all = [...this.waiters.values()];
    this.waiters.clear();
    for (const set of all) for (const wake of set) wake();
  }

  // Tasks with at least one waiter; for tests that check nothing is left behind.
  get size(): number {
    return this.waiters.size;
  }
}
