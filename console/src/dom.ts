// The few DOM helpers the views share: elements by id, table rows from text cells, and one error line.

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`the page has no #${id}`);
  return element as T;
}

export function input(id: string): string {
  return byId<HTMLInputElement>(id).value.trim();
}

// A row of text cells; a cell given as [text, className] gets the class (states are coloured by class).
export function row(cells: (string | [string, string])[]): HTMLTableRowElement {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    const [text, className] = typeof cell === "string" ? [cell, ""] : cell;
    td.textContent = text;
    if (className !== "") td.className = className;
    tr.append(td);
  }
  return tr;
}

export function fill(tableId: string, rows: HTMLTableRowElement[]): void {
  byId(tableId).querySelector("tbody")!.replaceChildren(...rows);
}

export function showError(error: unknown): void {
  byId("error").textContent = error === null ? "" : error instanceof Error ? error.message : String(error);
}

// Runs a form's action on submit, showing its error (a ConnectError says code and message) instead of throwing.
export function onSubmit(id: string, action: () => Promise<void>): void {
  byId<HTMLFormElement>(id).addEventListener("submit", (event) => {
    event.preventDefault();
    showError(null);
    action().catch(showError);
  });
}
