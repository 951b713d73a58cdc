// Work that arrives in bursts, spread over the turns of the event loop. Node runs everything one event brings
// before it polls sockets again: 100 streams whose request timeout fires at the same moment were reset in one timer
// callback, 100 calls on one socket read were started in one I/O callback, a dropped connection ended all its calls
// at once; each such call costs connect-node's general handler about 0.3-1 ms (bench/README.md), so /healthz,
// a socket poll away, waited 60-160 ms. Here tasks run at once while the current turn has run for less than
// `budgetMs`; later ones wait for the next turn (setImmediate), so that the loop polls every socket between two
// batches. A budget of time rather than of tasks: under ordinary load (a start costs about 50 µs) nothing waits,
// and a counted budget of 8 a turn cost Connect-served calls 16% of their rate under h2load.

export class FairTurns {
  readonly #queue: (() => void)[] = [];
  #head = 0;
  // A turn is open from its first task until the setImmediate that ends it.
  #open = false;
  #turnStart = 0;

  constructor(
    readonly budgetMs: number,
    // A task that throws in a later turn: reported here, and the next tasks still run.
    private readonly onError: (err: unknown) => void,
  ) {}

  run(task: () => void): void {
    if (this.#head === this.#queue.length) {
      const now = performance.now();
      if (!this.#open) {
        this.#open = true;
        this.#turnStart = now;
        setImmediate(this.#turn);
      }
      if (now - this.#turnStart < this.budgetMs) {
        task();
        return;
      }
    }
    this.#queue.push(task);
  }

  // Resolves in a turn with room for one more task: for code that is already running in a promise chain.
  slot(): Promise<void> {
    return new Promise((resolve) => this.run(resolve));
  }

  // Tasks waiting for a later turn.
  get waiting(): number {
    return this.#queue.length - this.#head;
  }

  readonly #turn = (): void => {
    this.#turnStart = performance.now();
    // At least one task a turn, however long it takes.
    do {
      if (this.#head === this.#queue.length) break;
      const task = this.#queue[this.#head]!;
      this.#queue[this.#head++] = noop;
      try {
        task();
      } catch (err) {
        this.onError(err);
      }
    } while (performance.now() - this.#turnStart < this.budgetMs);
    if (this.#head === this.#queue.length) {
      this.#queue.length = 0;
      this.#head = 0;
      this.#open = false;
    } else setImmediate(this.#turn);
  };
}

function noop(): void {}
