// Work that arrives in bursts, spread over the turns of the event loop. Node runs everything one event brings
// before it polls sockets again: 100 streams whose request timeout fires at the same moment were reset in one timer
// callback, 100 calls on one socket read were started in one I/O callback, a dropped connection ended all its calls
// at once; each such call costs connect-node's general handler about 0.3-1 ms (bench/README.md), so /healthz,
// a socket poll away, waited 60-160 ms. Here at most `perTurn` tasks run in one turn; the others wait for the
// next one (setImmediate), so that the loop polls every socket between two batches. A lone task runs at once.

export class FairTurns {
  #budget: number;
  readonly #queue: (() => void)[] = [];
  #head = 0;
  #scheduled = false;

  constructor(
    readonly perTurn: number,
    // A task that throws: reported here, and the next tasks still run.
    private readonly onError: (err: unknown) => void,
  ) {
    this.#budget = perTurn;
  }

  run(task: () => void): void {
    if (this.#budget > 0 && this.#head === this.#queue.length) {
      this.#budget--;
      // The budget comes back at the end of this turn.
      this.#schedule();
      task();
      return;
    }
    this.#queue.push(task);
    this.#schedule();
  }

  // Resolves in a turn with room for one more task: for code that is already running in a promise chain.
  slot(): Promise<void> {
    return new Promise((resolve) => this.run(resolve));
  }

  // Tasks waiting for a later turn.
  get waiting(): number {
    return this.#queue.length - this.#head;
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#turn);
  }

  readonly #turn = (): void => {
    this.#scheduled = false;
    this.#budget = this.perTurn;
    while (this.#budget > 0 && this.#head < this.#queue.length) {
      const task = this.#queue[this.#head]!;
      this.#queue[this.#head++] = noop;
      this.#budget--;
      try {
        task();
      } catch (err) {
        this.onError(err);
      }
    }
    if (this.#head === this.#queue.length) {
      this.#queue.length = 0;
      this.#head = 0;
    } else this.#schedule();
  };
}

function noop(): void {}
