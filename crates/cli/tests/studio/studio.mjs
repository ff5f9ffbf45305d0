// Drives a real chromium (Debian's, through playwright-core) against a real `iterion studio`.
// Run by crates/cli/tests/suite/studio.rs, which prepares the store and passes:
//   STUDIO_URL           the studio's base URL
//   STUDIO_NODE_MODULES  where playwright-core is installed (scripts/test.sh: target/node)
//   STUDIO_SHOTS         where screenshots go
//   STUDIO_PROFILE       a fresh, empty browser profile directory
//   STUDIO_RUNS          JSON: the ids of the prepared runs, and the hostile strings
//   STUDIO_SPAWN         JSON {argv, cwd, home}: a run to start while the list is open
//   STUDIO_CANCEL        JSON {argv, cwd, home, env, workflow}: a sandboxed run (another process)
//                        to cancel from its page
// Prints STUDIO_OK and exits 0 when every check passed; exits 1 with the reason otherwise.
import { createRequire } from "node:module";
import { spawn } from "node:child_process";
import path from "node:path";

const require = createRequire(path.join(process.env.STUDIO_NODE_MODULES, "noop.js"));
const { chromium } = require("playwright-core");

const base = process.env.STUDIO_URL;
const shots = process.env.STUDIO_SHOTS;
const runs = JSON.parse(process.env.STUDIO_RUNS);
const toSpawn = JSON.parse(process.env.STUDIO_SPAWN);
const toCancel = JSON.parse(process.env.STUDIO_CANCEL);

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const context = await chromium.launchPersistentContext(process.env.STUDIO_PROFILE, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
  ],
  viewport: { width: 1400, height: 1000 },
});
let failedChecks = null;
const page = context.pages()[0] ?? (await context.newPage());
try {
  const dialogs = [];
  page.on("dialog", (d) => { dialogs.push(d.message()); d.dismiss(); });
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });

  // 1. The runs list shows every prepared run, the failure code in the failed row, the subbot
  //    child nested right under its parent.
  await page.goto(base);
  for (const key of ["finished", "failed", "paused", "parent", "child", "hostile"]) {
    await page.locator(`tr.run[data-run="${runs[key]}"]`).waitFor({ timeout: 10000 });
  }
  const failedRow = page.locator(`tr.run[data-run="${runs.failed}"]`);
  check((await failedRow.getAttribute("data-status")) === "failed_resumable", "failed row status");
  check((await failedRow.locator(".code").textContent()) === "EXECUTION_FAILED", "failure code in the row");
  check((await page.locator(`tr.run[data-run="${runs.paused}"]`).getAttribute("data-status")) === "paused", "paused row");
  const childRow = page.locator(`tr.run[data-run="${runs.child}"]`);
  check((await childRow.getAttribute("data-depth")) === "1", "child nested");
  const order = await page.locator("tr.run").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-run")));
  check(order.indexOf(runs.child) === order.indexOf(runs.parent) + 1, "child right under its parent");
  check((await page.locator(`tr.run[data-run="${runs.finished}"] td`).nth(4).textContent()).trim() !== "—", "finished run's driver shown");
  await page.screenshot({ path: path.join(shots, "runs.png"), fullPage: true });

  // 2. Clicking the failed run opens its graph with the failed node marked.
  await failedRow.locator("a").click();
  await page.locator("svg#graph").waitFor();
  check((await page.locator('svg#graph g.node[data-node="boom"]').getAttribute("data-state")) === "failed", "failed node marked");
  check((await page.locator('svg#graph g.node[data-node="hello"]').getAttribute("data-state")) === "finished", "finished node marked");
  const box = await page.locator('svg#graph g.node[data-node="boom"] rect').boundingBox();
  check(box && box.width > 100 && box.height > 30, "failed node drawn");
  check((await page.locator("#failure-code").textContent()) === "EXECUTION_FAILED", "failure code in the header");
  check((await page.locator("#failure .remedy").textContent()).includes(`iterion resume ${runs.failed}`), "remedy");
  // The node's output is shown as text, <script> included.
  const out = await page.locator('details[data-node="hello"] pre.output').textContent();
  check(out.includes("<script>window.__xss=1</script>"), "script shown as text");
  await page.locator('details[data-node="hello"] summary').click();
  const logs = await page.locator('details[data-node="hello"] pre.node-logs').textContent();
  check(logs.includes("<script>window.__xss=1</script>"), "the node's log shown as text");
  await page.screenshot({ path: path.join(shots, "failed.png"), fullPage: true });

  // 3. The sandboxed run's sandbox panel names the blocked host.
  await page.goto(`${base}runs/${runs.finished}`);
  await page.locator("#sandbox").waitFor();
  check((await page.locator("#sandbox").getAttribute("data-state")) === "started", "sandbox started");
  const blocked = await page.locator("#blocked .host").allTextContents();
  check(blocked.includes("blocked.invalid"), `blocked host shown (${blocked})`);
  check((await page.locator("#sandbox").textContent()).includes("allowlist"), "egress policy shown");
  check((await page.locator("#secrets code.secret").allTextContents()).join(",") === "deploy_key", "secret by name");
  await page.screenshot({ path: path.join(shots, "sandbox.png"), fullPage: true });

  // 4. Answering the paused run's question finishes it (the page follows it live).
  await page.goto(`${base}runs/${runs.paused}`);
  await page.locator("#question").waitFor();
  check((await page.locator("#question .text").textContent()) === "Which greeting?", "question shown");
  await page.selectOption('#answer-form select[name="answer"]', "hi");
  await page.click('#answer-form button[type="submit"]');
  await page.locator('h1 [data-status="finished"]').waitFor({ timeout: 60000 });
  check((await page.locator("#question").count()) === 0, "question gone once answered");
  await page.screenshot({ path: path.join(shots, "answered.png"), fullPage: true });

  // 5. A run started while the list is open appears without a reload.
  await page.goto(base);
  await page.locator("tr.run").first().waitFor();
  await page.evaluate(() => { window.__noReload = true; });
  const before = await page.locator("tr.run").count();
  const child = spawn(toSpawn.argv[0], toSpawn.argv.slice(1), {
    cwd: toSpawn.cwd,
    env: { ...process.env, ITERION_HOME: toSpawn.home, RUST_LOG: "error" },
    stdio: "ignore",
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  await page.waitForFunction((n) => document.querySelectorAll("tr.run").length > n, before, { timeout: 20000 });
  check(await page.evaluate(() => window.__noReload === true), "no reload");
  const live = page.locator("tr.run").first();
  check((await live.locator("td.workflow").textContent()) === "slow", "the new run is on top");
  await page.screenshot({ path: path.join(shots, "live.png"), fullPage: true });
  // Its page follows it: running when opened, finished later, without a reload.
  await live.locator("a").click();
  await page.locator("svg#graph").waitFor();
  await page.evaluate(() => { window.__noReload = true; });
  const first = await page.locator('svg#graph g.node[data-node="wait"]').getAttribute("data-state");
  check(first === "running", `the slow node is running when its page opens (${first})`);
  await page.locator('h1 [data-status="finished"]').waitFor({ timeout: 30000 });
  check((await page.locator('svg#graph g.node[data-node="wait"]').getAttribute("data-state")) === "finished", "node finished live");
  check(await page.evaluate(() => window.__noReload === true), "the run page updated without a reload");
  await exited;
  await page.screenshot({ path: path.join(shots, "live-run.png"), fullPage: true });

  // 6. A running sandboxed run, executed by another `iterion run` process, cancelled from its
  //    page: the page follows it to `cancelled`, the node stopped, the request on the timeline.
  const napper = spawn(toCancel.argv[0], toCancel.argv.slice(1), {
    cwd: toCancel.cwd,
    env: { ...process.env, ...toCancel.env, ITERION_HOME: toCancel.home, RUST_LOG: "error" },
    stdio: "ignore",
  });
  const napperExited = new Promise((resolve) => napper.on("exit", (code) => resolve(code)));
  let napId = null;
  for (let i = 0; i < 600 && !napId; i++) {
    const list = await (await page.request.get(`${base}api/runs?workflow=${toCancel.workflow}`)).json();
    const r = list.runs.find((x) => x.status === "running");
    if (r) {
      const v = await (await page.request.get(`${base}api/runs/${r.id}`)).json();
      if (v.nodes.some((n) => n.id === "nap" && n.state === "running")) napId = r.id;
    }
    if (!napId) await page.waitForTimeout(200);
  }
  check(napId, "the sandboxed run to cancel is running");
  await page.goto(`${base}runs/${napId}`);
  await page.locator('h1 [data-status="running"]').waitFor();
  check((await page.locator("#sandbox").getAttribute("data-state")) === "started", "its sandbox started");
  check((await page.locator("#cancel-form button").count()) === 1, "a running run offers cancel");
  await page.screenshot({ path: path.join(shots, "cancel-before.png"), fullPage: true });
  await page.click("#cancel-form button");
  await page.locator('h1 [data-status="cancelled"]').waitFor({ timeout: 60000 });
  check((await page.locator("#failure-code").textContent()) === "CANCELLED", "cancelled code in the header");
  const napState = await page.locator('svg#graph g.node[data-node="nap"]').getAttribute("data-state");
  check(napState === "stopped", `the node is marked stopped, not failed (${napState})`);
  await page.locator('#timeline tr[data-type="cancel_requested"]').waitFor({ timeout: 10000 });
  await page.locator('#timeline tr[data-type="run_cancelled"]').waitFor({ timeout: 10000 });
  check((await page.locator("#cancel-form").count()) === 0, "no cancel button once cancelled");
  const napCode = await napperExited;
  check(napCode === 1, `the executing process ended the run (exit ${napCode})`);
  await page.screenshot({ path: path.join(shots, "cancelled.png"), fullPage: true });
  // A run that is over: the API refuses, and the page offers no button.
  const refused = await page.request.post(`${base}api/runs/${runs.failed}/cancel`);
  check(refused.status() === 401, `a cancel without the token (${refused.status()})`);
  await page.goto(`${base}runs/${runs.paused}`);
  check((await page.locator("#cancel-form").count()) === 0, "no cancel button on a finished run");

  // 7. Hostile run data renders as text: no script ran, no element was made from it.
  await page.goto(`${base}runs/${runs.hostile}`);
  await page.locator("#sandbox").waitFor();
  check((await page.locator("h1 .workflow").textContent()) === runs.hostile_name, "hostile workflow name as text");
  check((await page.locator("#blocked .host").allTextContents()).includes(runs.hostile_host), "hostile host as text");
  await page.goto(base);
  check((await page.locator(`tr.run[data-run="${runs.hostile}"] td.workflow`).textContent()) === runs.hostile_name, "hostile name in the list");
  check((await page.locator("main img, main svg[onload], td.workflow *").count()) === 0, "no element from run data");
  check(await page.evaluate(() => window.__xss === undefined), "no injected script ran");
  check(dialogs.length === 0, `no dialog (${dialogs})`);
  await page.screenshot({ path: path.join(shots, "hostile.png"), fullPage: true });
  check(consoleErrors.length === 0, `no console errors (${consoleErrors.join(" | ")})`);
} catch (e) {
  failedChecks = e;
  // What the page showed when it failed, for the test's message and the artefacts.
  try {
    await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true });
    console.log(`page at failure: ${page.url()}\n${(await page.evaluate(() => document.body.innerText)).slice(0, 3000)}`);
  } catch (_) { /* the page may be gone */ }
} finally {
  await context.close();
}
if (failedChecks) {
  console.log(`STUDIO_FAILED: ${failedChecks.stack || failedChecks}`);
  process.exit(1);
}
console.log("STUDIO_OK");
