// skillvc review: keyboard first. Every write is a POST to this server, which records it as
// an event through the same library path as the command line.
"use strict";
(function () {
  const token = document.body.dataset.token;
  const $ = (id) => document.getElementById(id);
  const state = { items: [], index: 0, output: 0, editing: false };

  function visible() {
    const only = $("only-pending").checked;
    return state.items.filter((it) => !only || it.status === "pending" || it._touched);
  }

  function current() {
    const list = visible();
    if (!list.length) return null;
    state.index = Math.max(0, Math.min(state.index, list.length - 1));
    return list[state.index];
  }

  function say(text, error) {
    const status = $("status");
    status.textContent = text;
    status.className = error ? "error" : "";
  }

  async function api(path, body) {
    const options = { headers: { "X-Skillvc-Review": token } };
    if (body !== undefined) {
      options.method = "POST";
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    const response = await fetch(path, options);
    const data = await response.json();
    if (!response.ok) {
      throw new Error(data.error + (data.hint ? " " + data.hint : ""));
    }
    return data;
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function render() {
    const list = visible();
    const pending = state.items.filter((it) => it.status === "pending").length;
    $("counts").textContent =
      `${state.items.length} items, ${pending} pending` +
      (list.length ? ` · item ${state.index + 1} of ${list.length}` : "");
    const box = $("item");
    box.replaceChildren();
    $("outputs").replaceChildren();
    const it = current();
    if (!it) {
      box.append(el("p", {}, "Nothing to review here."));
      return;
    }
    box.dataset.id = it.id;
    const head = el("p", { class: "meta" });
    head.append(el("span", { class: `badge ${it.status}`, id: "item-status" }, it.status), " ");
    head.append(`${it.id} · ${it.origin} · ${it.split} · ${it.kind || "-"}`);
    if (it.section) head.append(` · ${it.section}`);
    box.append(head, el("label", {}, "Input"), el("pre", { id: "item-input" }, it.input));
    if (it.targets.length) {
      box.append(el("label", {}, "Acceptable answers"));
      const ul = el("ul", { id: "item-targets" });
      it.targets.forEach((t) => ul.append(el("li", {}, t)));
      box.append(ul);
    }
    if (it.rubric) {
      box.append(el("label", {}, "Rubric"), el("pre", { id: "item-rubric" }, it.rubric));
    }
    const p = it.provenance || {};
    if (p.model) box.append(el("p", { class: "meta" }, `drafted by ${p.model} on ${p.date} (prompt ${p.prompt})`));
    renderOutputs(it);
  }

  function renderOutputs(it) {
    const section = $("outputs");
    if (!it.outputs.length) {
      section.append(el("p", { class: "meta" }, "No model outputs yet: run 'skillvc eval --baseline none' to see some."));
      return;
    }
    state.output = Math.max(0, Math.min(state.output, it.outputs.length - 1));
    section.append(el("h2", {}, "Outputs to label"));
    it.outputs.forEach((o, i) => {
      const label = o.label === null ? "" : o.label ? " pass" : " fail";
      const box = el("div", { class: "output" + (i === state.output ? " focused" : "") + label });
      box.dataset.output = o.output;
      box.append(el("p", { class: "meta" }, `with ${o.with} (${o.rev || "worktree"})` + (o.label === null ? "" : ` · labelled ${o.label ? "pass" : "fail"}`) + (o.note ? `: ${o.note}` : "")));
      box.append(el("pre", {}, o.text));
      section.append(box);
    });
    section.append(el("label", { for: "note" }, "Note"));
    const note = el("textarea", { id: "note", rows: "2" });
    section.append(note);
    const buttons = el("div", { class: "buttons" });
    const pass = el("button", { type: "button", id: "pass", class: "good" }, "Pass ");
    pass.append(el("kbd", {}, "p"));
    const fail = el("button", { type: "button", id: "fail", class: "bad" }, "Fail ");
    fail.append(el("kbd", {}, "f"));
    pass.onclick = () => labelOutput(true);
    fail.onclick = () => labelOutput(false);
    buttons.append(pass, fail);
    section.append(buttons);
  }

  async function load() {
    try {
      const data = await api("/api/items");
      state.items = data.items;
      render();
      say("");
    } catch (e) {
      say(e.message, true);
    }
  }

  function replace(item) {
    const i = state.items.findIndex((x) => x.id === item.id && x.file === item.file);
    item._touched = true;
    if (i >= 0) state.items[i] = Object.assign(item, { outputs: state.items[i].outputs });
  }

  async function decide(decision, extra) {
    const it = current();
    if (!it) return;
    try {
      const item = await api("/api/decide", Object.assign({ id: it.id, file: it.file, decision }, extra || {}));
      replace(item);
      say(`${it.id} ${item.status}.`);
      if (decision !== "edit") state.index += 1;
      render();
    } catch (e) {
      say(e.message, true);
    }
  }

  async function labelOutput(passed) {
    const it = current();
    if (!it || !it.outputs.length) return;
    const o = it.outputs[state.output];
    const note = $("note") ? $("note").value : "";
    try {
      const result = await api("/api/label", { id: it.id, output: o.output, label: passed ? "pass" : "fail", note });
      await load();  // the item again: its labels, and an answer the label may have added
      say(`Output labelled ${passed ? "pass" : "fail"}` + (result.target_added ? "; it is now an acceptable answer." : "."));
    } catch (e) {
      say(e.message, true);
    }
  }

  function openEditor() {
    const it = current();
    if (!it) return;
    state.editing = true;
    $("editor").hidden = false;
    $("edit-input").value = it.input;
    $("edit-targets").value = it.targets.join("\n");
    $("edit-rubric").value = it.rubric;
    $("edit-input").focus();
  }

  function closeEditor() {
    state.editing = false;
    $("editor").hidden = true;
    $("item").focus();
  }

  async function saveEditor() {
    const targets = $("edit-targets").value.split("\n").map((t) => t.trim()).filter(Boolean);
    await decide("edit", { input: $("edit-input").value, targets, rubric: $("edit-rubric").value });
    if (!$("status").classList.contains("error")) closeEditor();
  }

  function move(by) {
    state.index += by;
    state.output = 0;
    const n = visible().length;
    state.index = Math.max(0, Math.min(state.index, Math.max(0, n - 1)));
    render();
  }

  document.addEventListener("keydown", (event) => {
    const typing = ["TEXTAREA", "INPUT"].includes(document.activeElement.tagName);
    if (state.editing || typing) {
      if (event.key === "Escape") {
        event.preventDefault();
        if (state.editing) closeEditor(); else document.activeElement.blur();
      } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && state.editing) {
        event.preventDefault();
        saveEditor();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const it = current();
    const actions = {
      j: () => move(1), ArrowRight: () => move(1), ArrowDown: () => move(1),
      k: () => move(-1), ArrowLeft: () => move(-1), ArrowUp: () => move(-1),
      a: () => decide("approve"),
      r: () => decide("reject"),
      e: () => openEditor(),
      o: () => { if (it && it.outputs.length) { state.output = (state.output + 1) % it.outputs.length; render(); } },
      n: () => { if ($("note")) $("note").focus(); },
      p: () => labelOutput(true),
      f: () => labelOutput(false),
    };
    const action = actions[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });

  $("prev").onclick = () => move(-1);
  $("next").onclick = () => move(1);
  $("approve").onclick = () => decide("approve");
  $("reject").onclick = () => decide("reject");
  $("edit").onclick = () => openEditor();
  $("save").onclick = () => saveEditor();
  $("cancel").onclick = () => closeEditor();
  $("only-pending").onchange = () => { state.index = 0; render(); };
  load();
})();
