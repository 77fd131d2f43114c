// anneal's dashboard: a one-page app over the server's API (/v1, docs/api/openapi.yaml) with the
// token the user signs in with (kept in sessionStorage). Pages (hash routes): #/jobs, #/job/<id>,
// #/compare?ids=a,b. Everything a job produced (names, log lines, metric names, messages) reaches
// the page as text (textContent, createTextNode): never as HTML. Charts are uPlot's.
'use strict';
(() => {
  const TOKEN_KEY = 'anneal.token';
  const POLL_JOBS_MS = 3000, POLL_JOB_MS = 2000, POLL_LOGS_MS = 1000;
  const MAX_LOG_LINES = 5000, MAX_SERIES = 8;
  const ACTIVE = new Set(['InProgress', 'Stopping']);
  const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
  // The headline plots over steps: the metric names each one takes (the first the job has).
  const HEADLINE = [
    {title: 'Train loss', names: ['train_loss', 'loss'], loss: true},
    {title: 'Validation loss', names: ['val_loss', 'validation_loss', 'eval_loss']},
    {title: 'Tokens/s', names: ['tokens_per_s', 'tok_per_s', 'throughput']},
    {title: 'MFU (%)', names: ['mfu', 'mfu_percent']},
    {title: 'Learning rate', names: ['lr', 'learning_rate']},
    {title: 'Gradient norm', names: ['grad_norm', 'gradient_norm']},
  ];
  // Per-rank plots of other metrics with a title of their own (the rest are titled by their name).
  const RANK_TITLES = {step_time_s: 'Step time (s) per rank', peak_rss_mb: 'Peak RSS (MB) per rank'};
  const NODE_TITLES = {cpu_percent: 'CPU (%)', memory_used_mb: 'Memory used (MB)', disk_used_percent: 'Disk used (%)',
                       gpu_utilization_percent: 'GPU utilisation (%)', gpu_memory_used_mb: 'GPU memory used (MB)'};

  // ---- small DOM helpers: text only ----
  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = String(v);
      else if (k === 'class') e.className = v;
      else if (k === 'on') for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else if (k === 'checked' || k === 'value' || k === 'disabled' || k === 'hidden') e[k] = v;
      else e.setAttribute(k, String(v));
    }
    for (const kid of kids.flat()) {
      if (kid === undefined || kid === null || kid === false) continue;
      e.appendChild(typeof kid === 'string' || typeof kid === 'number' ? document.createTextNode(String(kid)) : kid);
    }
    return e;
  }
  const $ = (sel) => document.querySelector(sel);
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  function statusClass(s) { return 'st-' + String(s || '').replace(/[^A-Za-z]/g, ''); }
  function badge(status, secondary) {
    return el('span', {class: 'badge ' + statusClass(status)}, status || '?',
              secondary && secondary !== status ? el('span', {class: 'sub', text: ' · ' + secondary}) : null);
  }
  function ago(t) {
    if (!t) return '—';
    let s = Math.max(0, Date.now() / 1000 - t);
    if (s < 60) return Math.round(s) + ' s';
    if (s < 3600) return Math.round(s / 60) + ' min';
    if (s < 86400) return (s / 3600).toFixed(1) + ' h';
    return (s / 86400).toFixed(1) + ' d';
  }
  function when(t) { return t ? new Date(t * 1000).toLocaleString() : '—'; }
  function fmt(v) {
    if (v === undefined || v === null || !isFinite(v)) return '—';
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
    return String(Math.round(v * 1000) / 1000);
  }
  function banner(msg) {
    const b = $('#banner');
    b.textContent = msg || '';
    b.hidden = !msg;
  }

  // ---- the API ----
  class SignedOut extends Error {}
  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
  async function call(path, opts = {}, tok = token()) {
    const r = await fetch(path, {method: opts.method || 'GET', body: opts.body,
                                 headers: Object.assign({Authorization: 'Bearer ' + tok}, opts.body ? {'Content-Type': 'application/json'} : {}),
                                 cache: 'no-store'});
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    return {status: r.status, body, message: body && body.error ? body.error.message : r.status + ' ' + r.statusText};
  }
  // GET that signs the user out on 401 (the reason shown) and throws on any other error.
  async function get(path) {
    const r = await call(path);
    if (r.status === 401) { signOut(r.message); throw new SignedOut(r.message); }
    if (r.status !== 200) throw new Error(path + ': ' + r.message);
    return r.body;
  }
  function signOut(reason) {
    sessionStorage.removeItem(TOKEN_KEY);
    route.reason = reason;
    render();
  }

  // ---- routing: one page at a time, each with its own timers ----
  const route = {stop: null, reason: ''};
  let timers = [];
  function every(ms, f) {
    let alive = true, handle = null;
    const tick = async () => {
      if (!alive) return;
      try { await f(); banner(''); } catch (e) { if (!(e instanceof SignedOut)) banner(String(e.message || e)); else return; }
      if (alive) handle = setTimeout(tick, ms);
    };
    const t = {cancel() { alive = false; clearTimeout(handle); }};
    timers.push(t);
    tick();
    return t;
  }
  function render() {
    for (const t of timers) t.cancel();
    timers = [];
    charts.splice(0).forEach((c) => c.destroy());
    banner('');
    const main = clear($('#main'));
    const signed = !!token();
    $('#nav').hidden = !signed;
    $('#signout').hidden = !signed;
    $('#live').textContent = '';
    if (!signed) return signInPage(main);
    const h = location.hash || '#/jobs';
    $('#nav-jobs').className = h.startsWith('#/job') ? 'active' : '';
    $('#nav-compare').className = h.startsWith('#/compare') ? 'active' : '';
    let m;
    if ((m = /^#\/job\/([^?]+)$/.exec(h))) return jobPage(main, decodeURIComponent(m[1]));
    if (h.startsWith('#/compare')) {
      const q = new URLSearchParams(h.split('?')[1] || '');
      return comparePage(main, (q.get('ids') || '').split(',').filter(Boolean));
    }
    return jobsPage(main);
  }

  // ---- sign in ----
  function signInPage(main) {
    document.title = 'anneal · sign in';
    const input = el('input', {type: 'password', id: 'token', name: 'token', autocomplete: 'off', placeholder: 'ann_…',
                               'aria-label': 'API token'});
    const reason = el('p', {class: 'reason', id: 'signin-reason', role: 'alert', text: route.reason || ''});
    const form = el('form', {id: 'signin', on: {submit: async (ev) => {
      ev.preventDefault();
      const tok = input.value.trim();
      if (!tok) { reason.textContent = 'Paste a token (anneal tokens create, or the server\'s admin.token).'; return; }
      const r = await call('/v1/jobs?limit=1', {}, tok).catch((e) => ({status: 0, message: String(e)}));
      if (r.status !== 200) {
        reason.textContent = r.status === 401 ? 'Not signed in: ' + r.message : 'The server answered: ' + r.message;
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, tok);
      route.reason = '';
      if (!location.hash || location.hash === '#/signin') location.hash = '#/jobs';
      render();
    }}},
    el('label', {for: 'token', text: 'API token'}), input,
    el('button', {type: 'submit', class: 'primary', text: 'Sign in'}), reason);
    main.appendChild(el('div', {class: 'card signin'}, el('h1', {text: 'Sign in to anneal'}),
      el('p', {class: 'muted', text: 'The dashboard reads the API with your token. A viewer sees every job and changes none; ' +
        'a user sees their own. The token stays in this tab (sessionStorage).'}), form));
    input.focus();
  }

  // ---- jobs ----
  const jobsFilter = {status: '', user: ''};
  function jobsPage(main) {
    document.title = 'anneal · jobs';
    const statusSel = el('select', {id: 'filter-status', on: {change: () => { jobsFilter.status = statusSel.value; draw(); }}},
      ['', 'InProgress', 'Completed', 'Failed', 'Stopping', 'Stopped'].map((s) => el('option', {value: s, text: s || 'every status'})));
    statusSel.value = jobsFilter.status;
    const userSel = el('select', {id: 'filter-user', on: {change: () => { jobsFilter.user = userSel.value; draw(); }}});
    const compareBtn = el('button', {type: 'button', id: 'compare-selected', text: 'Compare selected', on: {click: () => {
      location.hash = '#/compare?ids=' + [...picked].map(encodeURIComponent).join(',');
    }}});
    const count = el('span', {class: 'muted'});
    const tbody = el('tbody');
    main.appendChild(el('h1', {text: 'Jobs'}));
    main.appendChild(el('div', {class: 'filters'}, el('label', {}, 'Status ', statusSel), el('label', {}, 'User ', userSel),
                        compareBtn, count));
    main.appendChild(el('div', {class: 'card'}, el('table', {id: 'jobs'},
      el('thead', {}, el('tr', {}, ['', 'Job', 'Status', 'User', 'Instances', 'Age', 'Step', 'Tokens/s'].map(
        (h, i) => el('th', {class: i >= 4 && i !== 5 ? 'num' : '', text: h})))), tbody)));
    const picked = new Set();
    let jobs = [], latest = {};
    function draw() {
      const users = [...new Set(jobs.map((j) => j.owner))].sort();
      const keep = userSel.value;
      clear(userSel).appendChild(el('option', {value: '', text: 'every user'}));
      for (const u of users) userSel.appendChild(el('option', {value: u, text: u}));
      userSel.value = users.includes(keep) ? keep : '';
      jobsFilter.user = userSel.value;
      const shown = jobs.filter((j) => (!jobsFilter.status || j.status === jobsFilter.status) &&
                                       (!jobsFilter.user || j.owner === jobsFilter.user));
      count.textContent = shown.length + ' of ' + jobs.length + ' jobs';
      clear(tbody);
      for (const j of shown) {
        const lp = latest[j.id] || {};
        tbody.appendChild(el('tr', {dataset: {job: j.id}},
          el('td', {}, el('input', {type: 'checkbox', 'aria-label': 'compare ' + j.id, checked: picked.has(j.id),
                                    on: {change: (ev) => { ev.target.checked ? picked.add(j.id) : picked.delete(j.id); }}})),
          el('td', {}, el('a', {href: '#/job/' + encodeURIComponent(j.id), text: j.id}),
             j.name && j.name !== j.id ? el('div', {class: 'muted', text: j.name}) : null),
          el('td', {}, badge(j.status, j.secondary_status)),
          el('td', {text: j.owner}),
          el('td', {class: 'num', text: j.instance_count}),
          el('td', {text: ago(j.created_at)}),
          el('td', {class: 'num', text: fmt(lp.step)}),
          el('td', {class: 'num', text: fmt(lp.tokens)})));
      }
    }
    every(POLL_JOBS_MS, async () => {
      const r = await get('/v1/jobs?limit=200');
      jobs = r.jobs || [];
      // Step and tokens/s: the newest points of the active jobs (GET .../metrics/latest).
      await Promise.all(jobs.filter((j) => ACTIVE.has(j.status)).slice(0, 50).map(async (j) => {
        const pts = (await get('/v1/jobs/' + encodeURIComponent(j.id) + '/metrics/latest')).points || [];
        latest[j.id] = {step: stepOf(pts), tokens: newestOf(pts, HEADLINE[2].names)};
      }));
      $('#live').textContent = 'updated ' + new Date().toLocaleTimeString();
      draw();
    });
  }
  // A job's current step from its series' newest points: the furthest step a rank's point carries
  // (the built-in trainer's metrics, step_time_s) or a metric named `step` logged (metric_definitions).
  function stepOf(points) {
    const steps = points.filter((p) => p.rank >= 0 && p.step >= 0).map((p) => p.step);
    const logged = newestOf(points, ['step']);
    if (logged !== undefined) steps.push(logged);
    return steps.length ? Math.max(...steps) : undefined;
  }
  // The newest value among the lowest rank's points of the first name present.
  function newestOf(points, names) {
    for (const n of names) {
      const mine = points.filter((p) => p.name === n && p.rank >= 0).sort((a, b) => a.rank - b.rank || b.at - a.at);
      if (mine.length) return mine[0].value;
    }
    return undefined;
  }

  // ---- charts ----
  const charts = [];
  class Chart {
    // box: the .chart element; a uPlot is made on the first data and remade when the series change.
    constructor(box, title, opts = {}) {
      this.box = box; this.opts = opts; this.u = null; this.key = '';
      box.appendChild(el('h3', {text: title}));
      this.empty = el('div', {class: 'empty', text: opts.emptyText || 'no points yet'});
      this.plot = el('div', {class: 'plot'});
      box.append(this.empty, this.plot);
      charts.push(this);
    }
    width() { return Math.max(200, this.plot.clientWidth || this.box.clientWidth - 16); }
    // series: [{label, color, width, dash}]; data: [xs, ys...] aligned; xlabel: the x axis's name
    // (the chart's own when not given). The box keeps what it plots (box.plotted, data-xlabel) for
    // tests/peers/ui_browser.mjs to compare with the API and the job's log.
    set(series, data, points, xlabel = this.opts.xlabel || '') {
      this.box.dataset.points = String(points);
      this.box.dataset.series = String(series.length);
      this.box.dataset.xlabel = xlabel;
      this.box.plotted = {labels: series.map((s) => s.label), data};
      if (!data[0] || data[0].length === 0) { this.empty.hidden = false; return; }
      this.empty.hidden = true;
      const key = series.map((s) => s.label).concat([xlabel]).join('\u0000');
      if (this.u && key === this.key) { this.u.setData(data); return; }
      if (this.u) this.u.destroy();
      this.key = key;
      this.u = new uPlot({
        width: this.width(), height: 200,
        // One point (or all at one x): a range around it rather than uPlot's years-wide time axis.
        scales: {x: {time: !!this.opts.time, range: (u, min, max) => {
          const xs = u.data[0], pad = this.opts.time ? 30 : 1;
          return xs.length && xs[0] === xs[xs.length - 1] ? [xs[0] - pad, xs[0] + pad] : [min, max];
        }}},
        axes: [{label: xlabel}, {size: 60, values: (u, splits, ai, space, incr) => splits.map((v) => tick(v, incr))}],
        cursor: {drag: {x: true, y: false}},
        series: [{label: xlabel || 'x'}].concat(series.map((s) => ({
          label: s.label, stroke: s.color, width: s.width || 1.5, dash: s.dash, spanGaps: true,
          value: (u, v) => fmt(v)}))),  // points drawn by uPlot where sparse (a single sample too)
      }, data, this.plot);
    }
    resize() { if (this.u) this.u.setSize({width: this.width(), height: 200}); }
    destroy() { if (this.u) this.u.destroy(); this.u = null; }
  }
  window.addEventListener('resize', () => charts.forEach((c) => c.resize()));

  // A y tick: uPlot's own format (at most 3 decimals), or with an exponent when the ticks are finer than
  // that (a learning rate of 1e-4) or the values large, with the digits the tick spacing needs.
  function tick(v, incr) {
    if (v === null || v === undefined) return '';
    const a = Math.abs(v);
    if (a === 0 || !(incr < 1e-3 || a >= 1e6)) return uPlot.fmtNum(v);
    return v.toExponential(Math.min(6, Math.max(0, Math.floor(Math.log10(a)) - Math.floor(Math.log10(incr || a)))));
  }
  // Smoothing as TensorBoard does it: an exponential moving average, debiased at the start.
  function smooth(ys, w) {
    let last = 0, n = 0;
    return ys.map((y) => {
      if (y === null || y === undefined || !isFinite(y)) return null;
      last = last * w + (1 - w) * y; n++;
      return last / (1 - Math.pow(w, n));
    });
  }
  // The x axis of series from byRank: steps, the points' ordinals, or both.
  function xlabelOf(series) {
    if (series.length && series.every((s) => s.overSteps)) return 'step';
    return series.some((s) => s.overSteps) ? 'step or point #' : 'point #';
  }
  // [xs, ys...] from series [{x: [...], y: [...]}], x sorted ascending and shared (uPlot's join).
  function align(list) {
    if (list.length === 0) return [[]];
    return uPlot.join(list.map((s) => [s.x, s.y]));
  }
  // A series keyed by x: a later point at the same x (a retried attempt's step) replaces an earlier.
  function seriesOf(points, xOf) {
    const m = new Map();
    points.forEach((p, i) => m.set(xOf(p, i), p.value));
    const xs = [...m.keys()].sort((a, b) => a - b);
    return {x: xs, y: xs.map((x) => m.get(x))};
  }

  // ---- a job's points, fetched incrementally ----
  class JobPoints {
    constructor(id) { this.id = id; this.next = 0; this.byName = new Map(); this.stepOf = new Map(); }
    async poll() {
      for (;;) {
        const r = await get('/v1/jobs/' + encodeURIComponent(this.id) + '/metrics?limit=100000&after=' + this.next);
        const pts = r.points || [];
        for (const p of pts) this.add(p);
        this.next = r.next;
        if (pts.length < 100000) return pts.length;
      }
    }
    // A point's step (p.x): the one it carries (the built-in trainer's metrics, step_time_s: step >= 0);
    // else, when the job logs a metric named `step` (e.g. 'step +([0-9]+)/' before the others in
    // metric_definitions), the step its rank logged last; else none.
    add(p) {
      const where = p.attempt + '/' + p.node + '/' + p.rank;
      if (p.name === 'step' && !(p.step >= 0)) this.stepOf.set(where, p.value);
      p.x = p.step >= 0 ? p.step : this.stepOf.get(where);
      if (!this.byName.has(p.name)) this.byName.set(p.name, []);
      this.byName.get(p.name).push(p);
    }
    names() { return [...this.byName.keys()]; }
    // Per rank (lowest first, at most MAX_SERIES): {rank, x, y, overSteps}: over steps when every point
    // of the rank's series has one, else over the point's ordinal among the rank's values (point #).
    byRank(name) {
      const per = new Map();
      for (const p of this.byName.get(name) || []) {
        if (p.rank < 0) continue;
        if (!per.has(p.rank)) per.set(p.rank, []);
        per.get(p.rank).push(p);
      }
      const ranks = [...per.keys()].sort((a, b) => a - b);
      return {total: ranks.length, series: ranks.slice(0, MAX_SERIES).map((r) => {
        const overSteps = per.get(r).every((p) => p.x !== undefined);
        const s = seriesOf(per.get(r), (p, i) => (overSteps ? p.x : i + 1));
        return Object.assign(s, {rank: r, overSteps});
      })};
    }
    // Per node, over time (the instances' samples, rank -1).
    byNode(name) {
      const per = new Map();
      for (const p of this.byName.get(name) || []) {
        if (p.rank >= 0) continue;
        if (!per.has(p.node)) per.set(p.node, []);
        per.get(p.node).push(p);
      }
      return [...per.keys()].sort((a, b) => a - b).map((n) => Object.assign(seriesOf(per.get(n), (p) => p.at), {node: n}));
    }
  }

  // ---- a job ----
  function jobPage(main, id) {
    document.title = 'anneal · ' + id;
    const head = el('div', {class: 'card', id: 'job-head'});
    const timeline = el('div', {class: 'card', id: 'timeline'});
    const facts = el('div', {class: 'grid2', id: 'job-facts'});
    const smoothIn = el('input', {type: 'range', id: 'smoothing', min: '0', max: '0.99', step: '0.01', value: '0.6'});
    const smoothOut = el('span', {text: '0.60'});
    const trainBox = el('div', {class: 'charts', id: 'train-charts'});
    const nodeBox = el('div', {class: 'charts', id: 'node-charts'});
    const profile = profileCard();
    const logs = logViewer(id, profile.line);
    main.append(head, timeline, facts,
      el('h2', {}, 'Training ', el('label', {class: 'muted sub'}, ' smoothing ', smoothIn, ' ', smoothOut)), trainBox,
      el('h2', {text: 'Instances (samples over time)'}), nodeBox, profile.root, el('h2', {text: 'Logs'}), logs.root);
    const data = new JobPoints(id);
    const made = new Map();  // plot key -> Chart
    let job = null, stopUi = null;
    function chartFor(box, key, title, opts) {
      if (!made.has(key)) {
        const c = el('div', {class: 'chart', dataset: {metric: key}});
        box.appendChild(c);
        made.set(key, new Chart(c, title, opts));
      }
      return made.get(key);
    }
    smoothIn.addEventListener('input', () => { smoothOut.textContent = Number(smoothIn.value).toFixed(2); drawCharts(); });
    function drawCharts() {
      const specNames = ((job && job.spec && job.spec.metric_definitions) || []).map((m) => m.name);
      const used = new Set(['step', ...Object.keys(RANK_TITLES)]);
      for (const h of HEADLINE) {
        const name = h.names.find((n) => data.byName.has(n)) || h.names.find((n) => specNames.includes(n)) || h.names[0];
        h.names.forEach((n) => used.add(n));
        const c = chartFor(trainBox, 'h:' + h.title, h.title + ' · ' + name, {xlabel: 'step',
          emptyText: specNames.includes(name) ? 'no points yet' :
            'no points: the built-in trainer reports ' + name + '; another program can define it in metric_definitions'});
        drawRanks(c, name, h.loss);
      }
      for (const n of [...new Set(specNames.concat(data.names()))].sort()) {
        if (used.has(n) || !(data.byName.get(n) || []).some((p) => p.rank >= 0) && !specNames.includes(n)) continue;
        drawRanks(chartFor(trainBox, 'm:' + n, n, {xlabel: 'step'}), n, false);
      }
      for (const [n, title] of Object.entries(RANK_TITLES)) {
        if (data.byName.has(n)) drawRanks(chartFor(trainBox, 'm:' + n, title, {xlabel: 'step'}), n, false);
      }
      const nodeNames = data.names().filter((n) => (data.byName.get(n) || []).some((p) => p.rank < 0));
      const order = Object.keys(NODE_TITLES).concat(nodeNames.filter((n) => !(n in NODE_TITLES)).sort());
      for (const n of order) {
        if (!nodeNames.includes(n) && !['cpu_percent', 'memory_used_mb', 'disk_used_percent'].includes(n)) continue;
        const per = data.byNode(n);
        const c = chartFor(nodeBox, 'n:' + n, NODE_TITLES[n] || n, {time: true, xlabel: 'time',
          emptyText: n.startsWith('gpu') ? 'no GPU samples (nvidia-smi not found on the instance)' : 'no samples yet'});
        c.set(per.map((s, i) => ({label: 'node ' + s.node, color: COLORS[i % COLORS.length]})), align(per),
              per.reduce((a, s) => a + s.x.length, 0));
      }
    }
    function drawRanks(c, name, isLoss) {
      const {total, series} = data.byRank(name);
      const defs = series.map((s, i) => ({label: 'rank ' + s.rank + (total > series.length && i === 0 ? ' (' + series.length + ' of ' + total + ' ranks)' : ''),
                                          color: COLORS[i % COLORS.length], width: isLoss ? 1 : 1.5}));
      const list = series.slice();
      if (isLoss && series.length) {
        defs.push({label: 'rank ' + series[0].rank + ' smoothed', color: '#111', width: 2.5});
        list.push({x: series[0].x, y: smooth(series[0].y, Number(smoothIn.value))});
      }
      c.set(defs, align(list), series.reduce((a, s) => a + s.x.length, 0), series.length ? xlabelOf(series) : 'step');
    }
    function drawHead() {
      clear(head);
      const end = job.ended_at > 0 ? job.ended_at : Date.now() / 1000;
      head.append(el('h1', {}, job.name || job.id, ' ', badge(job.status, job.secondary_status)),
        el('div', {class: 'facts'},
          el('div', {}, el('b', {text: 'id'}), job.id), el('div', {}, el('b', {text: 'user'}), job.owner),
          el('div', {}, el('b', {text: 'instances'}), String(job.instance_count)),
          el('div', {}, el('b', {text: 'attempt'}), String(job.attempt)),
          el('div', {}, el('b', {text: 'created'}), when(job.created_at)),
          el('div', {}, el('b', {text: 'running for'}), job.started_at > 0 ? ago(job.started_at + (Date.now() / 1000 - end)) : '—')),
        stopUi.root);
      stopUi.update(job);
    }
    function drawTimeline() {
      clear(timeline).appendChild(el('h2', {text: 'Status history'}));
      const hist = job.history || [];
      const bar = el('div', {class: 'timeline', id: 'timeline-bar'});
      const now = job.ended_at > 0 ? job.ended_at : Date.now() / 1000;
      hist.forEach((t, i) => {
        const until = i + 1 < hist.length ? hist[i + 1].at : now;
        const seg = el('div', {class: 'seg ' + statusClass(t.status), title: t.secondary_status + ' · ' + fmt(until - t.at) + ' s',
                               text: t.secondary_status});
        seg.style.flexGrow = String(Math.max(until - t.at, 0.02));
        bar.appendChild(seg);
      });
      timeline.appendChild(bar);
      timeline.appendChild(el('table', {}, el('thead', {}, el('tr', {}, ['at', 'status', 'message'].map((h) => el('th', {text: h})))),
        el('tbody', {}, hist.map((t) => el('tr', {}, el('td', {text: when(t.at)}), el('td', {}, badge(t.status, t.secondary_status)),
                                          el('td', {text: t.message || ''}))))));
    }
    function table(headers, rows, emptyText) {
      if (!rows.length) return el('p', {class: 'muted', text: emptyText});
      return el('table', {}, el('thead', {}, el('tr', {}, headers.map((h) => el('th', {text: h})))),
                el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c) => el('td', {text: c === undefined ? '' : String(c)}))))));
    }
    function drawFacts() {
      clear(facts);
      const spec = job.spec || {};
      const reasons = el('div', {class: 'card', id: 'reasons'}, el('h2', {text: 'Why'}));
      if (job.failure_reason) reasons.appendChild(el('p', {class: 'reason', id: 'failure-reason'}, 'Failure: ', job.failure_reason));
      if (job.pending_reason) reasons.appendChild(el('p', {id: 'pending-reason'}, 'Waiting: ', job.pending_reason));
      if (job.warm_pool) {
        reasons.appendChild(el('p', {id: 'warm-pool'}, 'Warm pool: ', Object.entries(job.warm_pool)
          .map(([k, v]) => k + ' ' + (typeof v === 'object' ? JSON.stringify(v) : String(v))).join(' · ')));
      }
      if (reasons.childNodes.length === 1) reasons.appendChild(el('p', {class: 'muted', text: 'No failure, nothing pending, no warm pool.'}));
      const ck = spec.checkpoint && spec.checkpoint.uri;
      reasons.appendChild(el('p', {id: 'checkpoints'}, 'Checkpoints: ', ck ? ck + (spec.checkpoint.local_path ? ' (ranks write ' +
        spec.checkpoint.local_path + ')' : '') + ' — the API does not list the saved steps yet; anneal ckpt lists them' :
        'no checkpoint.uri in the spec'));
      facts.append(reasons,
        el('div', {class: 'card', id: 'slowest'}, el('h2', {text: 'Slowest ranks (mean step time)'}),
           table(['rank', 'mean step (s)', 'steps reported'], (job.slowest_ranks || []).map((r) => [r.rank, fmt(r.mean_step_s), r.steps]),
                 'No step times yet (ranks that write $ANNEAL_PROGRESS_DIR, as the built-in trainer does, report them).')),
        el('div', {class: 'card', id: 'health'}, el('h2', {text: 'Health checks'}),
           (job.health_checks || []).length ? (job.health_checks || []).map(healthCheck) :
             el('p', {class: 'muted', text: 'No health checks for this attempt.'})),
        el('div', {class: 'card', id: 'instances'}, el('h2', {text: 'Instances and node reports'}),
           table(['node', 'instance', 'type', 'state', 'heartbeat'], (job.instances || []).map((i) => [i.node, i.id, i.instance_type, i.state,
             i.last_heartbeat ? ago(i.last_heartbeat) + ' ago' : '—']), 'No instances now.'),
           table(['node', 'state', 'exit', 'message'], (job.nodes || []).map((n) => [n.node, n.state, n.state === 'finished' ? n.exit_code : '',
             n.message]), '')));
    }
    // One instance's pre-start checks (docs/health-checks.md): each check's name, outcome and detail.
    function healthCheck(h) {
      const r = h.result && typeof h.result === 'object' ? h.result : {};
      const checks = Array.isArray(r.checks) ? r.checks : [];
      return el('div', {}, el('p', {}, el('b', {text: 'node ' + h.node + ' · ' + h.instance + ': '}),
                                      el('span', {class: h.ok ? 'ok' : 'reason', text: h.ok ? 'healthy' : 'UNHEALTHY'}), ' · ' + when(h.at)),
        checks.length ? el('ul', {class: 'checks'}, checks.map((c) => el('li', {},
          el('span', {class: c.skipped ? 'muted' : c.ok ? 'ok' : 'bad', text: String(c.name) + (c.skipped ? ' skipped' : c.ok ? ' ok' : ' FAILED')}),
          ': ' + String(c.skipped || c.detail || '')))) : el('p', {class: 'muted', text: JSON.stringify(h.result)}));
    }
    stopUi = stopButton(id, () => refresh());
    async function refresh() {
      job = await get('/v1/jobs/' + encodeURIComponent(id));
      drawHead(); drawTimeline(); drawFacts();
    }
    let finalPoll = false;
    every(POLL_JOB_MS, async () => {
      if (finalPoll) return;
      await refresh();
      await data.poll();
      drawCharts();
      const root = $('#main');
      root.dataset.job = id;
      $('#live').textContent = (ACTIVE.has(job.status) || job.status === 'InProgress' ? 'live · ' : '') + 'updated ' + new Date().toLocaleTimeString();
      if (!ACTIVE.has(job.status) && job.ended_at > 0) finalPoll = true;  // ended: nothing more will come
    });
    logs.start();
  }

  function stopButton(id, after) {
    const msg = el('span', {class: 'stopmsg', id: 'stop-msg', role: 'status'});
    const btn = el('button', {type: 'button', class: 'danger', id: 'stop', text: 'Stop job'});
    const yes = el('button', {type: 'button', class: 'danger', id: 'stop-confirm', text: 'Yes, stop it'});
    const no = el('button', {type: 'button', text: 'Cancel'});
    const confirm = el('span', {class: 'confirm', hidden: true}, 'Stop this job?', yes, no);
    btn.addEventListener('click', () => { confirm.hidden = false; btn.hidden = true; });
    no.addEventListener('click', () => { confirm.hidden = true; btn.hidden = false; });
    yes.addEventListener('click', async () => {
      confirm.hidden = true; btn.hidden = false;
      const r = await call('/v1/jobs/' + encodeURIComponent(id) + '/stop', {method: 'POST', body: '{}'});
      if (r.status === 401) return signOut(r.message);
      msg.className = 'stopmsg ' + (r.status === 202 ? 'ok' : 'reason');
      msg.textContent = r.status === 202 ? 'Stop requested.' : 'Refused (' + r.status + '): ' + r.message;
      if (r.status === 202) after();
    });
    const root = el('div', {class: 'actions'}, btn, confirm, msg);
    return {root, update(job) {
      btn.disabled = job.status === 'Stopping';
      root.hidden = !ACTIVE.has(job.status) && !msg.textContent;  // an ended job has nothing to stop
    }};
  }

  // The step profiler's summary (train.profile_steps): the "profile: " lines rank 0 logs at the end of
  // the traced window — the summary `anneal profile` prints — shown as text once they pass the log viewer.
  function profileCard() {
    const pre = el('pre', {class: 'profile', id: 'profile-summary'});
    const root = el('div', {class: 'card', id: 'profile', hidden: true}, el('h2', {text: 'Step profile: where the step time goes'}), pre,
      el('p', {class: 'muted', text: 'Traced with train.profile_steps; anneal profile JOB merges every rank\'s trace into one file for Perfetto or chrome://tracing.'}));
    return {root, line(x) {
      if (x.rank !== 0 || !x.text.startsWith('profile: ')) return;
      const t = x.text.slice('profile: '.length);
      if (t.startsWith('where the step time goes')) pre.textContent = '';  // a new window, or the lines read again
      pre.textContent += t + '\n';
      root.hidden = false;
    }};
  }

  function logViewer(id, onLine) {
    const rankSel = el('select', {id: 'log-rank'}, el('option', {value: '', text: 'every rank'}));
    const follow = el('input', {type: 'checkbox', id: 'log-follow', checked: true});
    const box = el('div', {class: 'logs', id: 'logs', dataset: {lines: '0'}, tabindex: '0', 'aria-label': 'log lines'});
    const state = el('span', {class: 'muted'});
    const root = el('div', {class: 'card'}, el('div', {class: 'logbar'}, el('label', {}, 'Rank ', rankSel),
      el('label', {}, follow, ' follow new lines'), state), box);
    let next = 0, ranks = new Set(), done = false;
    rankSel.addEventListener('change', () => { next = 0; done = false; clear(box); box.dataset.lines = '0'; });
    box.addEventListener('scroll', () => {
      follow.checked = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    });
    function addRank(r) {
      if (r < 0 || ranks.has(r)) return;
      ranks.add(r);
      const opts = [...ranks].sort((a, b) => a - b);
      const keep = rankSel.value;
      clear(rankSel).appendChild(el('option', {value: '', text: 'every rank'}));
      for (const x of opts) rankSel.appendChild(el('option', {value: String(x), text: 'rank ' + x}));
      rankSel.value = keep;
    }
    async function poll() {
      if (done) return;
      const q = '/v1/jobs/' + encodeURIComponent(id) + '/logs?limit=1000&after=' + next + (rankSel.value !== '' ? '&rank=' + rankSel.value : '');
      const asked = rankSel.value;
      const r = await get(q);
      if (asked !== rankSel.value) return;  // the rank changed while this was in flight
      for (const x of r.lines || []) {
        addRank(x.rank);
        if (onLine) onLine(x);
        box.appendChild(el('div', {class: 'line' + (x.stream === 'stderr' ? ' stderr' : '')},
          el('span', {class: 'where', text: (x.rank >= 0 ? 'r' + x.rank : 'agent') + ' n' + x.node}), x.text));
      }
      while (box.childNodes.length > MAX_LOG_LINES) box.removeChild(box.firstChild);
      box.dataset.lines = String(box.childNodes.length);
      next = r.next;
      if (follow.checked && (r.lines || []).length) box.scrollTop = box.scrollHeight;
      if (r.job_done && !(r.lines || []).length) { done = true; state.textContent = 'the job has ended: every line is shown'; }
      else state.textContent = 'following';
      if ((r.lines || []).length === 1000) return poll();
    }
    return {root, start() { every(POLL_LOGS_MS, poll); }};
  }

  // ---- compare ----
  function comparePage(main, ids) {
    document.title = 'anneal · compare';
    const chosen = new Set(ids);
    const pick = el('div', {class: 'pick', id: 'compare-pick'});
    const smoothIn = el('input', {type: 'range', id: 'compare-smoothing', min: '0', max: '0.99', step: '0.01', value: '0'});
    const box = el('div', {class: 'chart', id: 'compare-chart'});
    main.append(el('h1', {text: 'Compare loss curves'}),
      el('div', {class: 'card'}, el('p', {class: 'muted', text: 'Pick jobs: their train loss (lowest rank) over steps, overlaid.'}), pick),
      el('div', {class: 'filters'}, el('label', {}, 'smoothing ', smoothIn)), box);
    const chart = new Chart(box, 'Train loss', {xlabel: 'step', emptyText: 'pick jobs with train_loss points'});
    const points = new Map();  // id -> JobPoints
    let jobs = [];
    function drawPick() {
      clear(pick);
      for (const j of jobs) {
        pick.appendChild(el('label', {}, el('input', {type: 'checkbox', value: j.id, checked: chosen.has(j.id), on: {change: (ev) => {
          ev.target.checked ? chosen.add(j.id) : chosen.delete(j.id);
          history.replaceState(null, '', '#/compare?ids=' + [...chosen].map(encodeURIComponent).join(','));
          tick();
        }}}), ' ', j.id, ' ', badge(j.status)));
      }
    }
    function draw() {
      const defs = [], list = [], picked = [];
      let total = 0, i = 0;
      for (const id of chosen) {
        const p = points.get(id);
        if (!p) continue;
        const name = HEADLINE[0].names.find((n) => p.byName.has(n));
        const s = name && p.byRank(name).series[0];
        if (!s) continue;
        total += s.x.length;
        const w = Number(smoothIn.value);
        defs.push({label: id, color: COLORS[i++ % COLORS.length]});
        list.push({x: s.x, y: w > 0 ? smooth(s.y, w) : s.y});
        picked.push(s);
      }
      chart.set(defs, align(list), total, picked.length ? xlabelOf(picked) : 'step');
    }
    smoothIn.addEventListener('input', draw);
    async function tick() {
      for (const id of chosen) {
        if (!points.has(id)) points.set(id, new JobPoints(id));
        const j = jobs.find((x) => x.id === id);
        const p = points.get(id);
        if (!p.final) await p.poll();
        if (j && !ACTIVE.has(j.status) && j.ended_at > 0) p.final = true;
      }
      draw();
    }
    let first = true;
    every(POLL_JOB_MS * 2, async () => {
      jobs = ((await get('/v1/jobs?limit=200')).jobs || []).filter((j) => j.status !== undefined);
      if (first) { drawPick(); first = false; } else {
        // keep the check boxes, refresh the badges only when the list changed
        if (pick.childNodes.length !== jobs.length) drawPick();
      }
      await tick();
    });
  }

  // ---- start ----
  window.addEventListener('hashchange', render);
  $('#signout').addEventListener('click', () => { route.reason = 'Signed out.'; sessionStorage.removeItem(TOKEN_KEY); render(); });
  window.addEventListener('error', (ev) => banner('The dashboard hit an error: ' + (ev.message || ev)));
  window.addEventListener('unhandledrejection', (ev) => {
    if (!(ev.reason instanceof SignedOut)) banner('The dashboard hit an error: ' + (ev.reason && ev.reason.message || ev.reason));
  });
  render();
})();
