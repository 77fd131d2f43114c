#!/usr/bin/env node
// The browser half of tests/peers/ui_test.sh: drives Debian's chromium (headless, 1366x768) with
// playwright-core from tools/npm through the dashboard, printing "ok ..." / "FAIL ..." per check.
// Environment: UI_URL, JOB_A, JOB_B, JOB_C, GO_FILE, SHOTS, ANNEAL, ADMIN_TOKEN, VIEWER_TOKEN, REVOKED_TOKEN.
import { writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(join(dirname(fileURLToPath(import.meta.url)), "../../tools/npm/package.json"));
const { chromium } = require("playwright-core");
const E = process.env;
const [URL, A, B, C] = [E.UI_URL, E.JOB_A, E.JOB_B, E.JOB_C];
let failed = 0;
const ok = (name) => console.log(`ok   ${name}`);
const bad = (name) => { failed++; console.log(`FAIL ${name}`); };
const check = (name, cond, detail = "") => (cond ? ok(name) : bad(detail ? `${name} (${detail})` : name));
const api = async (path, token = E.ADMIN_TOKEN) =>
  (await fetch(URL + path, { headers: { Authorization: `Bearer ${token}` } })).json();

// Waits until f() (in the page) returns a truthy value; returns it, or null after ms. Every wait of
// this script is for a condition, and bounded: no fixed sleeps. A negative (something must not be
// shown) is asserted only once a positive condition proves the page has settled (the refresh that
// would have shown it has happened).
async function until(page, f, arg, ms = 8000) {
  try {
    return await (await page.waitForFunction(f, arg, { timeout: ms, polling: 100 })).jsonValue();
  } catch (e) {
    return null;
  }
}

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true,
                                        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
const page = await context.newPage();
page.setDefaultTimeout(10000);  // playwright's own waits (waitForSelector, click, fill): 10 s, not 30

// Every console error, page error, failed request and HTTP error answer is unexpected unless the
// phase allows it: the wrong and revoked tokens' 401s, the viewer's 403 on stop.
let allowed = [];  // [{status, path: RegExp}]
const unexpected = [];
const isAllowed = (status, url) => allowed.some((a) => a.status === status && a.path.test(url));
page.on("console", (m) => {
  if (m.type() !== "error") return;
  const s = /status of (\d+)/.exec(m.text());
  if (s && isAllowed(Number(s[1]), m.location().url || "")) return;
  unexpected.push(`console error: ${m.text()} at ${m.location().url}`);
});
page.on("pageerror", (e) => unexpected.push(`page error: ${e.message}`));
page.on("requestfailed", (r) => unexpected.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
const uiAnswers = [];
page.on("response", (r) => {
  if (r.url().startsWith(URL + "/ui")) uiAnswers.push([r.url(), r.headers()["content-security-policy"]]);
  if (r.status() >= 400 && !isAllowed(r.status(), r.url())) unexpected.push(`HTTP ${r.status()} for ${r.url()}`);
});

const shot = async (name) => page.screenshot({ path: join(E.SHOTS, `${name}.png`), fullPage: true });
const noSideways = async (what) => {
  const [sw, cw] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  check(`${what}: no sideways scroll at 1366x768 (scrollWidth ${sw} <= clientWidth ${cw})`, sw <= cw && cw <= 1366);
};
const text = (sel) => page.locator(sel).innerText();
const go = async (hash) => page.evaluate((h) => { location.hash = h; }, hash);
const rowIds = () => page.$$eval("#jobs tbody tr", (r) => r.map((x) => x.dataset.job));
// The jobs table shows exactly these jobs (in any order): waited for, then asserted with what it shows.
const rowsAre = async (name, want) => {
  const got = await until(page, (w) => {
    const ids = [...document.querySelectorAll("#jobs tbody tr")].map((x) => x.dataset.job);
    return ids.length === w.length && w.every((j) => ids.includes(j)) ? ids : null;
  }, want);
  check(name, got !== null, `shows ${JSON.stringify(await rowIds())}, want ${JSON.stringify(want)}`);
};
// A job's page has read its every log line: the page is this job's (the id in its head) and its log
// viewer found the ended job with nothing more to show, so every line went through the viewer (and the
// profile card's test of it). Returns the lines shown, or null after ms.
// The built-in trainer's own log (rank 0's lines through the API): what each step line and validation
// line prints, and the end's peak RSS. A loss is read from its hex float, exactly.
const hexFloat = (t) => {
  const m = /^(-?)0x([0-9a-f]+)(?:\.([0-9a-f]*))?p([+-]\d+)$/i.exec(t);
  if (!m) return NaN;
  const frac = m[3] || "";
  return (m[1] ? -1 : 1) * Number(BigInt("0x" + m[2] + frac)) * 2 ** (Number(m[4]) - 4 * frac.length);
};
// Half a unit of the last digit a printed number shows ("6.000e-04": 5e-8; "12.5": 0.05).
const halfUnit = (t) => {
  const m = /^[-+]?\d+(?:\.(\d+))?(?:e([-+]?\d+))?$/i.exec(t);
  return 0.5 * 10 ** ((m[2] ? Number(m[2]) : 0) - (m[1] ? m[1].length : 0));
};
const trainerLog = (lines) => {
  const steps = [], vals = [];
  let rss = null;
  for (const t of lines) {
    let m = /^step +(\d+)\/\d+ \| loss [0-9.]+ \((\S+)\) \| lr (\S+) \| grad norm (\S+) \| \d+ ms \| (\d+) tok\/s \| MFU (\S+)%/.exec(t);
    if (m) steps.push({ step: Number(m[1]), loss: m[2], lr: m[3], grad_norm: m[4], tokens_per_s: m[5], mfu: m[6] });
    if ((m = /^step +(\d+) \| val loss (\S+)/.exec(t))) vals.push({ step: Number(m[1]), val_loss: m[2] });
    if ((m = /^peak RSS of rank 0: (\S+) MB$/.exec(t))) rss = m[1];
  }
  return { steps, vals, rss };
};
// What a chart plots (Chart.set keeps it on its box), once it has n points and a canvas.
const plotted = (key, n) => until(page, ([k, want]) => {
  const c = document.querySelector(`.chart[data-metric="${k}"]`);
  if (!c || !c.plotted || Number(c.dataset.points) !== want || !c.querySelector("canvas")) return null;
  return { xlabel: c.dataset.xlabel, legendX: c.querySelector(".u-legend .u-series .u-label")?.textContent ?? null,
           labels: c.plotted.labels, data: c.plotted.data };
}, [key, n], 10000);
// The (x, y) pairs of series i of a plot (uPlot's aligned data: a series' gaps are null).
const pairs = (p, i) => p.data[0].map((x, j) => [x, p.data[i + 1][j]]).filter(([, y]) => y !== null && y !== undefined);

const settled = (id, ms = 10000) => until(page, (j) => {
  const head = [...document.querySelectorAll("#job-head .facts > div")].some((d) => d.textContent === "id" + j);
  const state = document.querySelector("#main .logbar > .muted")?.textContent;
  return head && state === "the job has ended: every line is shown" ? Number(document.querySelector("#logs").dataset.lines) : null;
}, id, ms);

try {
  // ---- sign in: a wrong token first ----
  const first = await page.goto(`${URL}/ui/`);
  check("GET /ui/ answers 200 text/html", first.status() === 200 && /^text\/html/.test(first.headers()["content-type"]));
  check("... with Content-Security-Policy: default-src 'self'", first.headers()["content-security-policy"] === "default-src 'self'");
  await page.waitForSelector("#signin");
  allowed = [{ status: 401, path: /\/v1\/jobs\?limit=1$/ }];
  await page.fill("#token", "ann_" + "0".repeat(64));
  await page.click("#signin button[type=submit]");
  const reason = await until(page, () => document.querySelector("#signin-reason")?.textContent);
  check("a wrong token stays on the sign-in page with the API's reason", /token is not valid/.test(reason || ""), reason);
  await shot("signin");
  allowed = [];

  // ---- jobs ----
  await page.fill("#token", E.ADMIN_TOKEN);
  await page.click("#signin button[type=submit]");
  await rowsAre("the admin signs in and the jobs page lists A, B and C (3 rows)", [A, B, C]);
  const rowA = await until(page, (a) => {
    const c = document.querySelector(`tr[data-job="${a}"]`)?.children;
    return c && c[6].textContent === "40" ? [...c].map((x) => x.textContent) : null;
  }, A);
  check("... A's row: InProgress, uma, 1 instance, step 40, tokens/s 10480", rowA && /^InProgress/.test(rowA[2]) && rowA[3] === "uma" &&
        rowA[4] === "1" && rowA[7] === "10480", JSON.stringify(rowA));
  // C, the built-in trainer without metric_definitions: its step and tokens/s from the trainer's metrics.
  const logC = trainerLog((await api(`/v1/jobs/${C}/logs?rank=0&limit=100000`)).lines.map((l) => l.text));
  const lastC = logC.steps[logC.steps.length - 1];
  const rowC = await until(page, (c) => {
    const td = document.querySelector(`tr[data-job="${c}"]`)?.children;
    return td && td[6].textContent === "8" ? [...td].map((x) => x.textContent) : null;
  }, C);
  check(`... C's row (the built-in trainer, no metric_definitions): step 8 and the tokens/s its last step line prints (${lastC?.tokens_per_s})`,
        rowC && lastC && lastC.step === 8 && Math.abs(Number(rowC[7]) - Number(lastC.tokens_per_s)) <= 0.5 + 1e-3,
        JSON.stringify(rowC));
  await page.selectOption("#filter-user", "uma");
  await rowsAre("the user filter shows uma's job only", [A]);
  await page.selectOption("#filter-user", "");
  await page.selectOption("#filter-status", "Completed");
  await rowsAre("the status filter shows the completed jobs only (B)", [B]);
  await page.selectOption("#filter-status", "");
  await rowsAre("... and with no filter all three again", [A, B, C]);
  await shot("jobs");
  await noSideways("jobs page");

  // ---- job A ----
  const apiLoss = (await api(`/v1/jobs/${A}/metrics?name=train_loss&limit=100000`)).points.length;
  await page.click(`a[href="#/job/${A}"]`);
  const drawn = await until(page, (n) => {
    const c = document.querySelector('.chart[data-metric="h:Train loss"]');
    return c && Number(c.dataset.points) === n && c.querySelector("canvas") ? Number(c.dataset.points) : null;
  }, apiLoss);
  check(`job A's loss plot drew as many points as the API returns (${apiLoss})`, drawn === apiLoss && apiLoss === 40,
        `page ${drawn}, API ${apiLoss}`);
  const counts = await page.$$eval(".chart", (cs) => Object.fromEntries(cs.map((c) => [c.dataset.metric, Number(c.dataset.points || 0)])));
  for (const [key, n] of [["h:Validation loss", 4], ["h:Tokens/s", 40], ["h:MFU (%)", 40], ["h:Learning rate", 40],
                          ["h:Gradient norm", 40], ["m:accuracy", 40]]) {
    check(`... and ${key.slice(2)} with ${n} points`, counts[key] === n, `got ${counts[key]}`);
  }
  const cpu = await until(page, () => Number(document.querySelector('.chart[data-metric="n:cpu_percent"]')?.dataset.points || 0) > 0, null, 10000);
  check("... and the instance's CPU samples over time", cpu === true, JSON.stringify(counts));
  check("... and memory and disk plots", "n:memory_used_mb" in counts && "n:disk_used_percent" in counts);
  const segs = await page.$$eval("#timeline-bar .seg", (s) => s.map((x) => x.textContent));
  check("the status history timeline has A's transitions up to Training", segs.length >= 2 && segs[segs.length - 1] === "Training",
        JSON.stringify(segs));
  check("... and the page reads InProgress", /InProgress/.test(await text("#job-head h1")));
  await until(page, () => /step 40\/40/.test(document.querySelector("#logs")?.textContent || ""));
  const marker = `LATE-${process.pid}-${Date.now()}`;
  writeFileSync(E.GO_FILE, marker);  // the rank prints it now, after the page was opened
  const late = await until(page, (m) => [...document.querySelectorAll("#logs .line")].some((l) => l.textContent.includes("late line " + m)),
                           marker, 10000);
  check("the log viewer shows a line the rank printed after the page was opened", late === true);
  await page.evaluate(() => document.querySelector("#logs").scrollIntoView());
  await shot("job");
  await noSideways("job page");

  // ---- job B: what a job prints is text ----
  await go(`#/job/${B}`);
  const xss = "<img src=x onerror=window.__pwned=1>";
  const shown = await until(page, (s) => [...document.querySelectorAll("#logs .line")].some((l) => l.textContent.includes(s)), xss);
  check("B's log shows the markup it printed as text", shown === true);
  // Before the negatives, the page settles: every line of B is shown (as many as the API has), and
  // every image of the document has finished loading or failing (an injected <img src=x> would have
  // fired its onerror by then); then one task more, for an error event queued behind it.
  const linesB = (await api(`/v1/jobs/${B}/logs?limit=100000`)).lines.length;
  const seenB = await settled(B);
  const imagesDone = await until(page, () => [...document.images].every((i) => i.complete));
  check(`... B's page settled: its every log line shown (${seenB} of the API's ${linesB}), its images loaded`,
        seenB === linesB && imagesDone === true, `lines ${seenB}, images done ${imagesDone}`);
  await page.evaluate(() => new Promise((r) => setTimeout(r, 0)));
  check("... and no script ran (window.__pwned undefined, no img in the page)",
        await page.evaluate(() => window.__pwned === undefined && document.querySelectorAll("#main img").length === 0));
  // B's metric_definitions have no `step`: its loss is plotted over the points' ordinals, and says so.
  const nLossB = (await api(`/v1/jobs/${B}/metrics?name=train_loss&limit=100000`)).points.length;
  const lossB = await plotted("h:Train loss", nLossB);
  check(`... B's loss (a regex without a step) is plotted over "point #", x = 1..25 (legend "${lossB?.legendX}")`,
        lossB?.xlabel === "point #" && lossB?.legendX === "point #" &&
        JSON.stringify(pairs(lossB, 0).map(([x]) => x)) === JSON.stringify([...Array(25).keys()].map((i) => i + 1)),
        JSON.stringify(lossB && { xlabel: lossB.xlabel, xs: lossB.data[0] }));
  const headB = await until(page, () => /Completed/.test(document.querySelector("#job-head h1")?.textContent || ""));
  check("... and the Completed job's page says so", headB === true, await text("#job-head h1"));
  await shot("job-b");
  await noSideways("job B's page");

  // ---- job C: the built-in trainer's metrics, plotted over its steps with the values its log prints ----
  const specC = await api(`/v1/jobs/${C}`);
  check("C's spec has no metric_definitions", !(specC.spec?.metric_definitions || []).length, JSON.stringify(specC.spec?.metric_definitions));
  const apiStepsC = (await api(`/v1/jobs/${C}/metrics?name=train_loss&limit=100000`)).points.map((p) => p.step);
  check(`... the API's train_loss points of C carry the steps its log prints (${logC.steps.map((x) => x.step)})`,
        logC.steps.length === 4 && JSON.stringify(apiStepsC) === JSON.stringify(logC.steps.map((x) => x.step)), JSON.stringify(apiStepsC));
  await go(`#/job/${C}`);
  for (const [key, name, rows] of [["h:Train loss", "loss", logC.steps], ["h:Learning rate", "lr", logC.steps],
                                   ["h:Gradient norm", "grad_norm", logC.steps], ["h:Tokens/s", "tokens_per_s", logC.steps],
                                   ["h:MFU (%)", "mfu", logC.steps], ["h:Validation loss", "val_loss", logC.vals]]) {
    const p = await plotted(key, rows.length);
    const got = p ? pairs(p, 0) : [];
    const want = rows.map((r) => [r.step, r[name]]);
    // The loss exactly (the hex float); every other figure within half a unit of the digit printed.
    const same = got.length === want.length && want.length > 0 && got.every(([x, y], i) => x === want[i][0] &&
      (name === "loss" ? y === hexFloat(want[i][1]) : Math.abs(y - Number(want[i][1])) <= halfUnit(want[i][1]) * (1 + 1e-9)));
    check(`C's ${key.slice(2)} plot: x = the steps its log prints, y = the values it prints (${want.map(([x, y]) => x + ":" + y).join(" ")})`,
          same && p.labels[0] === "rank 0", p ? JSON.stringify(got) : "no plot");
    check(`... its x axis is named "step" (legend "${p?.legendX}")`, p?.xlabel === "step" && p?.legendX === "step");
  }
  const rss = await plotted("m:peak_rss_mb", 4);
  const rssLast = rss ? pairs(rss, 0).pop() : null;
  check(`C's peak RSS plot ends at step 8 with the ${logC.rss} MB its last line prints`, rssLast && rssLast[0] === 8 &&
        Math.abs(rssLast[1] - Number(logC.rss)) <= halfUnit(logC.rss), JSON.stringify(rssLast));
  await page.locator("#train-charts").screenshot({ path: join(E.SHOTS, "job-builtin-plots.png") });

  // ---- job C: the step profile's summary ----
  const logged = (await api(`/v1/jobs/${C}/logs?rank=0&limit=100000`)).lines.map((l) => l.text)
    .filter((t) => t.startsWith("profile: ")).map((t) => t.slice(9));
  const reading = logged.find((t) => t.startsWith("reading: "));
  await go(`#/job/${C}`);
  const card = await until(page, (r) => {
    const p = document.querySelector("#profile-summary");
    return p && !document.querySelector("#profile").hidden && p.textContent.includes(r) ? p.textContent : null;
  }, reading || "(none logged)", 10000);
  check("C's page shows the step profile rank 0 logged, reading and all", reading && card !== null &&
        logged.slice(0, logged.indexOf(reading) + 1).every((t) => card.includes(t)), `${reading} | ${card}`);
  // The negative once B's page has read every line (each passed the profile card's test): no card.
  await go(`#/job/${B}`);
  const readB = await settled(B);
  check("... and a job without profiling shows no profile card, once its page read every line",
        readB !== null && await page.evaluate(() => document.querySelector("#profile")?.hidden === true),
        `lines read ${readB}, card hidden ${await page.evaluate(() => document.querySelector("#profile")?.hidden)}`);
  await go(`#/job/${C}`);
  await until(page, () => document.querySelector("#profile") && !document.querySelector("#profile").hidden);
  await shot("job-profile");
  await noSideways("job C's page");

  // ---- compare ----
  const apiB = (await api(`/v1/jobs/${B}/metrics?name=train_loss&limit=100000`)).points.length;
  await go(`#/compare?ids=${A},${B},${C}`);
  const over = await until(page, (n) => {
    const c = document.querySelector("#compare-chart");
    return c && Number(c.dataset.series) === 3 && Number(c.dataset.points) === n && c.querySelector("canvas") && c.plotted
      ? { xlabel: c.dataset.xlabel, legendX: c.querySelector(".u-legend .u-series .u-label")?.textContent, labels: c.plotted.labels,
          data: c.plotted.data } : null;
  }, apiLoss + apiB + logC.steps.length);
  check(`compare overlays A, B and C (3 series, ${apiLoss} + ${apiB} + ${logC.steps.length} points)`, over !== null,
        await page.evaluate(() => JSON.stringify(document.querySelector("#compare-chart")?.dataset)));
  check(`... B's points have no step: the x axis is named "step or point #" (legend "${over?.legendX}")`,
        over?.xlabel === "step or point #" && over?.legendX === "step or point #");
  await go(`#/compare?ids=${A},${C}`);
  const steps = await until(page, (n) => {
    const c = document.querySelector("#compare-chart");
    return c && Number(c.dataset.series) === 2 && Number(c.dataset.points) === n && c.querySelector("canvas") && c.plotted
      ? { xlabel: c.dataset.xlabel, legendX: c.querySelector(".u-legend .u-series .u-label")?.textContent, labels: c.plotted.labels,
          data: c.plotted.data } : null;
  }, apiLoss + logC.steps.length);
  check(`compare A and C (2 series, ${apiLoss} + ${logC.steps.length} points) over steps: the x axis is named "step" (legend "${steps?.legendX}")`,
        steps?.xlabel === "step" && steps?.legendX === "step", JSON.stringify(steps && { xlabel: steps.xlabel, labels: steps.labels }));
  const cmpC = steps ? pairs(steps, steps.labels.indexOf(C)) : [];
  check("... C's curve at the steps and losses its log prints", JSON.stringify(cmpC) ===
        JSON.stringify(logC.steps.map((r) => [r.step, hexFloat(r.loss)])), JSON.stringify(cmpC));
  const cmpA = steps ? pairs(steps, steps.labels.indexOf(A)).map(([x]) => x) : [];
  check("... A's at the steps its regex logs (1..40)", JSON.stringify(cmpA) === JSON.stringify([...Array(40).keys()].map((i) => i + 1)),
        JSON.stringify(cmpA.slice(0, 5)));
  await shot("compare");
  await noSideways("compare page");

  // ---- a viewer cannot stop ----
  await page.click("#signout");
  await page.waitForSelector("#signin");
  await page.fill("#token", E.VIEWER_TOKEN);
  await page.click("#signin button[type=submit]");
  await go(`#/job/${A}`);
  await page.waitForSelector("#stop:not([disabled])");
  allowed = [{ status: 403, path: new RegExp(`/v1/jobs/${A}/stop$`) }];
  await page.click("#stop");
  await page.click("#stop-confirm");
  const refusal = await until(page, () => /Refused/.test(document.querySelector("#stop-msg")?.textContent || "")
    ? document.querySelector("#stop-msg").textContent : null);
  check("a viewer's stop is refused and the page shows why", /Refused \(403\).*viewer/.test(refusal || ""), refusal);
  check("... and A still runs", (await api(`/v1/jobs/${A}`)).status === "InProgress");
  await shot("viewer-stop");
  allowed = [];

  // ---- a revoked token ----
  await page.click("#signout");
  await page.waitForSelector("#signin");
  await page.fill("#token", E.REVOKED_TOKEN);
  await page.click("#signin button[type=submit]");
  await go("#/jobs");
  await page.waitForSelector(`tr[data-job="${A}"]`);
  allowed = [{ status: 401, path: /\/v1\// }];
  execFileSync(E.ANNEAL, ["users", "remove", "rita", "--server", URL], { env: { ...process.env, ANNEAL_TOKEN: E.ADMIN_TOKEN } });
  const gone = await until(page, () => document.querySelector("#signin-reason")?.textContent || null);
  check("a revoked token returns to the sign-in page with the reason", /rita no longer exists|not valid/.test(gone || ""), gone);
  allowed = [];
} catch (e) {
  bad(`the browser script: ${e.stack || e}`);
}
check("every /ui answer carried the CSP", uiAnswers.length >= 5 && uiAnswers.every(([, csp]) => csp === "default-src 'self'"),
      JSON.stringify(uiAnswers.filter(([, c]) => c !== "default-src 'self'")));
check("no console error, page error or failed request but the expected 401s and 403", unexpected.length === 0,
      unexpected.slice(0, 5).join(" | "));
await browser.close();
process.exit(failed ? 1 : 0);
