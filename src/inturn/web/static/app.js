// inturn's dashboard: live updates and fixes without a reload.  No build step,
// no inline script (the Content-Security-Policy forbids it), no library.
"use strict";

const EVERY = 2000; // milliseconds from one refresh of the live part to the next

function live() {
  return document.getElementById("live");
}

// The live part again, rendered by the server (escaped there); kept as it is
// when the answer fails, so a restart of the service does not blank the page.
async function refresh() {
  const part = live();
  if (part === null || document.hidden) return;
  try {
    const answer = await fetch(window.location.href, {
      headers: { "X-Inturn-Live": "1" },
      credentials: "same-origin",
    });
    if (answer.ok) part.innerHTML = await answer.text();
  } catch (error) {
    // offline for a moment: the next round tries again
  }
}

function say(text, bad) {
  const outcome = document.getElementById("outcome");
  outcome.textContent = text;
  outcome.className = bad ? "error" : "done";
}

// A fix's form: posted here, its fields in the query as the API reads them,
// the page's CSRF token in a header; the answer's outcome said on the page.
async function fix(form) {
  const question = form.dataset.confirm;
  if (question && !window.confirm(question)) return;
  const fields = new FormData(form);
  const csrf = fields.get("csrf");
  fields.delete("csrf");
  const url = new URL(form.action);
  for (const [name, value] of fields) url.searchParams.set(name, value);
  for (const button of form.querySelectorAll("button")) button.disabled = true;
  try {
    const answer = await fetch(url, {
      method: "POST",
      headers: { "X-CSRF-Token": csrf },
      credentials: "same-origin",
    });
    const body = await answer.json();
    if (answer.ok) {
      say("Done.", false);
    } else {
      const superseded = answer.status === 409 ? " (another writer got there first)" : "";
      say(body.error.message + superseded, true);
    }
  } catch (error) {
    say("The dashboard did not answer: " + error, true);
  }
  await refresh();
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form instanceof HTMLFormElement && form.classList.contains("fix")) {
    event.preventDefault();
    fix(form);
  }
});

// The next refresh is asked for only once the last one is answered: a slow
// journal is never asked twice at once by one page.
async function keepRefreshing() {
  await refresh();
  window.setTimeout(keepRefreshing, EVERY);
}

window.setTimeout(keepRefreshing, EVERY);
