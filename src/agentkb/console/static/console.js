/* agentkb console: the live parts htmx does not do by itself. Jobs follow their event stream
   (EventSource); the chat posts a question and shows the agent's run as its events arrive (fetch). */
(function () {
  "use strict";

  var sources = [];

  function csrf() {
    return document.body.getAttribute("data-csrf") || "";
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  /* --- ingestion jobs ------------------------------------------------------------------------- */

  function showJob(row, job) {
    row.setAttribute("data-state", job.state);
    var state = row.querySelector("[data-job-state]");
    state.textContent = job.state;
    state.className = "badge state-" + job.state;
    var counts = Object.keys(job.counts || {}).map(function (k) { return k + " " + job.counts[k]; });
    row.querySelector("[data-job-counts]").textContent = counts.join(" · ");
    var error = row.querySelector("[data-job-error]");
    error.textContent = job.error || "";
    error.hidden = !job.error;
    var progress = row.querySelector("[data-job-progress]");
    if (job.finished) {
      progress.max = 1;
      progress.value = 1;
      var cancel = row.querySelector("[data-job-cancel]");
      if (cancel) cancel.remove();
    }
  }

  function refreshSummary() {
    var summary = document.getElementById("kb-summary");
    if (summary && window.htmx) {
      window.htmx.ajax("GET", window.location.pathname, { target: "#kb-summary", select: "#kb-summary", swap: "outerHTML" });
    }
  }

  function watchJobs(root) {
    sources = sources.filter(function (entry) {
      if (entry.row.isConnected) return true;
      entry.source.close();
      return false;
    });
    root.querySelectorAll("[data-job-events]").forEach(function (row) {
      if (row.dataset.watching) return;
      row.dataset.watching = "1";
      var source = new EventSource(row.getAttribute("data-job-events"));
      sources.push({ row: row, source: source });
      source.onmessage = function (message) {
        var job = JSON.parse(message.data);
        showJob(row, job);
        if (job.finished || job.shutdown) {
          source.close();
          if (job.finished) refreshSummary();
        }
      };
      source.onerror = function () { source.close(); };
    });
  }

  /* --- chat ------------------------------------------------------------------------------------ */

  function citation(source) {
    var item = el("li", "citation");
    var where = source.kind === "kb" ? "knowledge base " : "table ";
    item.append(el("span", "cite-name", where + (source.name || "")));
    if (source.source) item.append(el("span", "muted", " · " + source.source));
    if (source.chunk_id) item.append(el("span", "muted", " · chunk " + source.chunk_id));
    return item;
  }

  function showEvent(turn, event) {
    var steps = turn.querySelector(".steps");
    if (event.kind === "delta") {  /* the model's text as it writes it: a draft until it is placed */
      var draft = turn.querySelector(".draft");
      if (!draft || draft.dataset.response !== String(event.response)) {
        if (draft) draft.remove();
        draft = el("p", "draft answer-text", "");
        draft.dataset.response = String(event.response);
        turn.append(draft);
      }
      draft.textContent += event.text;
      return;
    }
    var drafted = turn.querySelector(".draft");  /* a thought (shown with its action) or the answer (below) */
    if (drafted && event.kind !== "step") drafted.remove();
    if (event.kind === "action") {
      var step = el("li", "step pending");
      if (event.log && event.log.trim()) step.append(el("p", "thought", event.log));
      var call = el("div", "tool-call");
      call.append(el("span", "badge", event.tool));
      call.append(el("code", "tool-input", event.tool_input));
      step.append(call);
      steps.append(step);
    } else if (event.kind === "step") {
      var pending = steps.querySelector(".step.pending");
      if (!pending) {
        pending = el("li", "step");
        var again = el("div", "tool-call");
        again.append(el("span", "badge", event.tool));
        again.append(el("code", "tool-input", event.tool_input));
        pending.append(again);
        steps.append(pending);
      }
      pending.classList.remove("pending");
      var details = el("details", "observation");
      details.append(el("summary", null, "Observation"));
      details.append(el("pre", null, event.observation));
      pending.append(details);
    } else if (event.kind === "output") {
      var answer = el("div", "answer");
      answer.append(el("h3", null, "Answer"));
      answer.append(el("p", "answer-text", event.answer));
      if (event.sources && event.sources.length) {
        answer.append(el("h4", null, "Sources"));
        var list = el("ol", "citations");
        event.sources.forEach(function (s) { list.append(citation(s)); });
        answer.append(list);
      }
      turn.append(answer);
      turn.dataset.answer = event.answer;
    } else if (event.kind === "error") {
      var failed = el("div", "alert", event.content);
      failed.setAttribute("role", "alert");
      turn.append(failed);
    }
  }

  async function ask(form) {
    var question = form.querySelector("[name=question]");
    var status = form.querySelector("[data-chat-status]");
    var button = form.querySelector("button[type=submit]");
    var text = question.value.trim();
    if (!text) { question.focus(); return; }
    var conversation = document.getElementById("conversation");
    var history = Array.prototype.map.call(conversation.querySelectorAll(".turn[data-answer]"), function (t) {
      return { question: t.dataset.question, answer: t.dataset.answer };
    });
    var turn = el("li", "turn");
    turn.dataset.question = text;
    turn.append(el("p", "question", text));
    turn.append(el("ol", "steps"));
    conversation.append(turn);
    var body = new FormData(form);
    body.set("history", JSON.stringify(history));
    question.value = "";
    button.disabled = true;
    status.textContent = "The agent is working…";
    try {
      var response = await fetch(form.getAttribute("data-chat"), {
        method: "POST", body: body, headers: { "X-CSRF-Token": csrf(), "HX-Request": "true" }
      });
      var type = response.headers.get("content-type") || "";
      if (!response.ok || type.indexOf("text/event-stream") !== 0) {
        var holder = el("div");
        holder.innerHTML = await response.text();  /* the server's escaped alert fragment */
        turn.append(holder);
        return;
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "";
      for (;;) {
        var read = await reader.read();
        if (read.done) break;
        buffer += decoder.decode(read.value, { stream: true });
        var end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          var chunk = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          chunk.split("\n").forEach(function (line) {
            if (line.indexOf("data: ") === 0) showEvent(turn, JSON.parse(line.slice(6)));
          });
        }
      }
    } catch (error) {
      showEvent(turn, { kind: "error", content: "The connection was lost: " + error });
    } finally {
      button.disabled = false;
      status.textContent = "";
      question.focus();
    }
  }

  function chat(root) {
    root.querySelectorAll("form[data-chat]").forEach(function (form) {
      if (form.dataset.ready) return;
      form.dataset.ready = "1";
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        ask(form);
      });
      form.querySelector("[name=question]").addEventListener("keydown", function (event) {
        if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
          event.preventDefault();
          form.requestSubmit();
        }
      });
    });
  }

  function start(root) {
    watchJobs(root);
    chat(root);
  }

  if (window.htmx) {
    window.htmx.onLoad(start);
  } else {
    document.addEventListener("DOMContentLoaded", function () { start(document); });
  }
})();
