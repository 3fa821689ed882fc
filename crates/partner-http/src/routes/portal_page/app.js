// The partner's webhook portal (extensions §10). Vanilla JS, no third-party code. The one-time
// code is read from the fragment (never sent to a server in a URL) and exchanged for a bearer
// kept in this closure only: no cookie, no storage, so a reload ends the session.
(function () {
  'use strict';

  var T = {
    en: {
      title: 'Webhook portal', skip: 'Skip to content', language: 'Language',
      endpoints: 'Endpoints', log: 'Delivery log', status: 'Status', event: 'Event',
      endpoint: 'Endpoint', all: 'All', pending: 'Pending', delivered: 'Delivered',
      failed: 'Failed', apply: 'Apply filters', created: 'Created', attempts: 'Attempts',
      lastResult: 'Last result', actions: 'Actions', noDeliveries: 'No deliveries match these filters.',
      pages: 'Pages', first: 'First page', previous: 'Previous page', next: 'Next page',
      attemptsOf: 'Attempts of the delivery', when: 'When', statusCode: 'Answer',
      duration: 'Duration', error: 'Error', close: 'Close', newSecret: 'New signing secret',
      secretWarning: 'Copy this secret now and store it safely: it is shown only this once. Until the previous secret expires, deliveries are signed with both.',
      secret: 'Secret', copy: 'Copy', copied: 'Secret copied to the clipboard.',
      copyFailed: 'Could not copy: select the secret and copy it by hand.',
      done: 'I have stored it',
      footer: 'This page keeps your session in memory only: reloading it ends the session.',
      opening: 'Opening your session…', loading: 'Loading…',
      noCode: 'This page needs a portal link. Ask your administrator for a new link.',
      badLink: 'This portal link is invalid, already used or expired. Links work once and for a short time: ask for a new one.',
      ended: 'Your session has ended. Ask for a new portal link to continue.',
      sessionUntil: 'Session valid until {0}.',
      failedCall: 'The action failed: {0}',
      enabled: 'Enabled', disabled: 'Disabled',
      reason_gone: 'Deliveries stopped: the receiver answered 410 Gone, which means it no longer wants them.',
      reason_failing: 'Deliveries stopped: every delivery failed for the configured time.',
      reason_manual: 'Deliveries stopped: the endpoint was disabled by hand.',
      disabledSince: 'Disabled since {0}.',
      events: 'Events: {0}', previousUntil: 'The previous secret also signs until {0}.',
      test: 'Send test event', enable: 'Enable', disable: 'Disable', rotate: 'Rotate secret',
      recoverSince: 'Resend failed deliveries since', recover: 'Recover',
      showLog: 'Show its deliveries', resend: 'Resend', showAttempts: 'Attempts',
      confirmRotate: 'Rotate the signing secret of {0}? The receiver must be updated with the new secret.',
      confirmDisable: 'Disable {0}? It will receive no deliveries until enabled again.',
      testQueued: 'Test event queued for {0}.', enabledDone: '{0} is enabled.',
      disabledDone: '{0} is disabled.', rotated: 'New secret created for {0}.',
      recovered: '{0} failed deliveries queued again.', resent: 'Delivery queued again.',
      badSince: 'Choose a time within the last 7 days.',
      chartTitle: 'Last 24 hours by hour',
      chartSummary: 'Last 24 hours: {0} delivered, {1} failed, {2} pending.',
      chartTable: 'Chart as a table', hour: 'Hour',
      noAnswer: 'no answer', showing: 'Showing {0} deliveries.', attemptsFor: 'Attempts of {0} ({1}).',
      noEndpoints: 'No endpoints yet.', noAttempts: 'No attempts yet.'
    },
    es: {
      title: 'Portal de webhooks', skip: 'Ir al contenido', language: 'Idioma',
      endpoints: 'Endpoints', log: 'Registro de entregas', status: 'Estado', event: 'Evento',
      endpoint: 'Endpoint', all: 'Todos', pending: 'Pendiente', delivered: 'Entregada',
      failed: 'Fallida', apply: 'Aplicar filtros', created: 'Creada', attempts: 'Intentos',
      lastResult: 'Último resultado', actions: 'Acciones', noDeliveries: 'Ninguna entrega coincide con estos filtros.',
      pages: 'Páginas', first: 'Primera página', previous: 'Página anterior', next: 'Página siguiente',
      attemptsOf: 'Intentos de la entrega', when: 'Cuándo', statusCode: 'Respuesta',
      duration: 'Duración', error: 'Error', close: 'Cerrar', newSecret: 'Nuevo secreto de firma',
      secretWarning: 'Copie este secreto ahora y guárdelo en un lugar seguro: solo se muestra esta vez. Hasta que caduque el secreto anterior, las entregas se firman con ambos.',
      secret: 'Secreto', copy: 'Copiar', copied: 'Secreto copiado al portapapeles.',
      copyFailed: 'No se pudo copiar: seleccione el secreto y cópielo a mano.',
      done: 'Ya lo he guardado',
      footer: 'Esta página guarda su sesión solo en memoria: al recargarla, la sesión termina.',
      opening: 'Abriendo su sesión…', loading: 'Cargando…',
      noCode: 'Esta página necesita un enlace del portal. Pida un enlace nuevo a su administrador.',
      badLink: 'Este enlace del portal no es válido, ya se usó o caducó. Los enlaces sirven una sola vez y por poco tiempo: pida uno nuevo.',
      ended: 'Su sesión ha terminado. Pida un nuevo enlace del portal para continuar.',
      sessionUntil: 'Sesión válida hasta {0}.',
      failedCall: 'La acción falló: {0}',
      enabled: 'Activado', disabled: 'Desactivado',
      reason_gone: 'Entregas detenidas: el receptor respondió 410 Gone, es decir, ya no las quiere.',
      reason_failing: 'Entregas detenidas: todas las entregas fallaron durante el tiempo configurado.',
      reason_manual: 'Entregas detenidas: el endpoint se desactivó a mano.',
      disabledSince: 'Desactivado desde {0}.',
      events: 'Eventos: {0}', previousUntil: 'El secreto anterior también firma hasta {0}.',
      test: 'Enviar evento de prueba', enable: 'Activar', disable: 'Desactivar', rotate: 'Cambiar secreto',
      recoverSince: 'Reenviar entregas fallidas desde', recover: 'Recuperar',
      showLog: 'Ver sus entregas', resend: 'Reenviar', showAttempts: 'Intentos',
      confirmRotate: '¿Cambiar el secreto de firma de {0}? Habrá que actualizar el receptor con el nuevo secreto.',
      confirmDisable: '¿Desactivar {0}? No recibirá entregas hasta que se active de nuevo.',
      testQueued: 'Evento de prueba en cola para {0}.', enabledDone: '{0} está activado.',
      disabledDone: '{0} está desactivado.', rotated: 'Nuevo secreto creado para {0}.',
      recovered: '{0} entregas fallidas vuelven a la cola.', resent: 'La entrega vuelve a la cola.',
      badSince: 'Elija un momento de los últimos 7 días.',
      chartTitle: 'Últimas 24 horas por hora',
      chartSummary: 'Últimas 24 horas: {0} entregadas, {1} fallidas, {2} pendientes.',
      chartTable: 'Gráfico como tabla', hour: 'Hora',
      noAnswer: 'sin respuesta', showing: 'Se muestran {0} entregas.', attemptsFor: 'Intentos de {0} ({1}).',
      noEndpoints: 'Todavía no hay endpoints.', noAttempts: 'Todavía no hay intentos.'
    }
  };

  var lang = document.documentElement.lang === 'es' ? 'es' : 'en';
  var token = null;
  var endpoints = [];
  var charts = {};
  var filters = { status: '', event: '', endpointId: '' };
  var cursors = [''];
  var page = 0;
  var nextCursor = null;
  var logRows = [];

  function $(id) { return document.getElementById(id); }

  function t(key) {
    var s = (T[lang] && T[lang][key]) || T.en[key] || key;
    for (var i = 1; i < arguments.length; i++) {
      s = s.split('{' + (i - 1) + '}').join(String(arguments[i]));
    }
    return s;
  }

  // Elements are built with textContent only: nothing the API returns is parsed as HTML.
  function h(tag, attrs) {
    var el = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'text') { el.textContent = attrs[k]; }
      else if (k === 'on') { el.addEventListener('click', attrs[k]); }
      else if (attrs[k] !== null && attrs[k] !== undefined) { el.setAttribute(k, attrs[k]); }
    });
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c !== null && c !== undefined) { el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); }
    }
    return el;
  }

  function when(ts) {
    if (!ts) { return '—'; }
    return new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'medium' }).format(new Date(ts));
  }

  function announce(msg) { $('alert').textContent = ''; $('status').textContent = msg; }
  function fail(msg) { $('status').textContent = ''; $('alert').textContent = msg; }

  function translate() {
    document.documentElement.lang = lang;
    document.title = t('title');
    $('lang').value = lang;
    $('lang-nav').setAttribute('aria-label', t('language'));
    Array.prototype.forEach.call(document.querySelectorAll('[data-i18n]'), function (el) {
      el.textContent = t(el.getAttribute('data-i18n'));
    });
  }

  function ended() {
    token = null;
    Array.prototype.forEach.call(document.querySelectorAll('main section'), function (s) { s.hidden = true; });
    $('session').textContent = '';
    fail(t('ended'));
  }

  function api(method, path, body) {
    if (!token) { return Promise.reject(new Error(t('ended'))); }
    var headers = { Authorization: 'Bearer ' + token };
    if (body !== undefined) { headers['Content-Type'] = 'application/json'; }
    return fetch(path, {
      method: method, headers: headers, credentials: 'omit', cache: 'no-store',
      referrerPolicy: 'no-referrer', body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (json) {
        if (res.status === 401) { ended(); throw new Error(t('ended')); }
        if (!res.ok) {
          throw new Error((json.error && json.error.message) || String(res.status));
        }
        return json;
      });
    });
  }

  function reasonText(e) {
    if (e.disabledReason === 'gone') { return t('reason_gone'); }
    if (e.disabledReason === 'failing') { return t('reason_failing'); }
    return t('reason_manual');
  }

  function endpointName(id) {
    for (var i = 0; i < endpoints.length; i++) {
      if (endpoints[i].id === id) { return hostOf(endpoints[i].url); }
    }
    return id;
  }

  function hostOf(url) {
    try { var u = new URL(url); return u.host + u.pathname; } catch (e) { return url; }
  }

  // --- The chart: the last 24 hours of an endpoint's deliveries, by hour (the API's counts). ---

  function loadChart(e) {
    return api('GET', 'api/v1/webhook-deliveries/by-hour?endpointId=' + encodeURIComponent(e.id)).then(function (json) {
      charts[e.id] = json.data.map(function (b) {
        return { at: new Date(b.hour).getTime(), delivered: b.delivered, failed: b.failed, pending: b.pending };
      });
      return charts[e.id];
    });
  }

  function svgEl(tag, attrs) {
    var el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    Object.keys(attrs).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    return el;
  }

  function drawChart(e, box) {
    var buckets = charts[e.id];
    box.textContent = '';
    if (!buckets) { box.appendChild(h('p', { 'class': 'muted', text: t('loading') })); return; }
    var total = { delivered: 0, failed: 0, pending: 0 };
    var max = 1;
    buckets.forEach(function (b) {
      total.delivered += b.delivered; total.failed += b.failed; total.pending += b.pending;
      max = Math.max(max, b.delivered + b.failed + b.pending);
    });
    var summary = t('chartSummary', total.delivered, total.failed, total.pending);
    var hourFmt = new Intl.DateTimeFormat(lang, { hour: '2-digit', minute: '2-digit' });
    var W = 480, H = 140, top = 8, bottom = 22, bw = W / 24;
    var svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': t('chartTitle') + '. ' + summary, focusable: 'false' });
    svg.appendChild(svgEl('line', { x1: 0, y1: H - bottom, x2: W, y2: H - bottom, stroke: '#57606a', 'stroke-width': 1 }));
    var colours = { delivered: '#1a7f37', failed: '#cf222e', pending: '#9a6700' };
    buckets.forEach(function (b, i) {
      var y = H - bottom;
      ['delivered', 'failed', 'pending'].forEach(function (k) {
        if (!b[k]) { return; }
        var hgt = (H - top - bottom) * b[k] / max;
        y -= hgt;
        var r = svgEl('rect', { x: i * bw + 2, y: y, width: bw - 4, height: hgt, fill: colours[k], 'data-status': k });
        r.appendChild(svgEl('title', {})).textContent = hourFmt.format(new Date(b.at)) + ': ' + b[k] + ' ' + t(k);
        svg.appendChild(r);
      });
      if (i % 6 === 0) {
        var label = svgEl('text', { x: i * bw + 2, y: H - 6, 'font-size': 11, fill: '#1b1f24' });
        label.textContent = hourFmt.format(new Date(b.at));
        svg.appendChild(label);
      }
    });
    var legend = h('ul', { 'class': 'legend' });
    ['delivered', 'failed', 'pending'].forEach(function (k) {
      legend.appendChild(h('li', {}, h('span', { 'class': 'swatch s-' + k, 'aria-hidden': 'true' }), t(k) + ': ' + total[k]));
    });
    var table = h('table', {},
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', text: t('hour') }), h('th', { scope: 'col', 'class': 'num', text: t('delivered') }),
        h('th', { scope: 'col', 'class': 'num', text: t('failed') }), h('th', { scope: 'col', 'class': 'num', text: t('pending') }))));
    var tb = h('tbody', {});
    buckets.forEach(function (b) {
      tb.appendChild(h('tr', {}, h('th', { scope: 'row', text: hourFmt.format(new Date(b.at)) }),
        h('td', { 'class': 'num', text: String(b.delivered) }), h('td', { 'class': 'num', text: String(b.failed) }),
        h('td', { 'class': 'num', text: String(b.pending) })));
    });
    table.appendChild(tb);
    box.appendChild(h('h4', { text: t('chartTitle') }));
    box.appendChild(svg);
    box.appendChild(legend);
    box.appendChild(h('details', {}, h('summary', { text: t('chartTable') }), h('div', { 'class': 'scroll' }, table)));
  }

  // --- Endpoints. ---

  function localInput(date) {
    var d = new Date(date.getTime() - date.getTimezoneOffset() * 60000);
    return d.toISOString().slice(0, 16);
  }

  function action(button, run) {
    button.disabled = true;
    return run().catch(function (err) { fail(t('failedCall', err.message)); })
      .then(function () { button.disabled = false; });
  }

  function renderEndpoints() {
    var box = $('endpoints');
    box.textContent = '';
    if (!endpoints.length) { box.appendChild(h('p', { text: t('noEndpoints') })); }
    var sel = $('f-endpoint');
    while (sel.options.length > 1) { sel.remove(1); }
    endpoints.forEach(function (e) {
      var name = hostOf(e.url);
      sel.appendChild(h('option', { value: e.id, text: name }));
      var on = e.status === 'enabled';
      var headingId = 'ep-' + e.id;
      var card = h('article', { 'class': 'card', 'aria-labelledby': headingId, 'data-endpoint': e.id },
        h('h3', { id: headingId, text: name }),
        h('p', {}, h('span', { 'class': 'badge ' + e.status, text: on ? t('enabled') : t('disabled') })),
        on ? null : h('p', { 'class': 'reason', text: reasonText(e) + (e.disabledAt ? ' ' + t('disabledSince', when(e.disabledAt)) : '') }),
        h('p', { 'class': 'muted', text: t('events', e.events.join(', ')) }),
        e.previousSecretExpiresAt ? h('p', { 'class': 'muted', text: t('previousUntil', when(e.previousSecretExpiresAt)) }) : null);
      var chart = h('div', { 'class': 'chart' });
      card.appendChild(chart);
      drawChart(e, chart);
      var actions = h('div', { 'class': 'actions' });
      actions.appendChild(h('button', { type: 'button', 'data-action': 'test', text: t('test'), on: function (ev) {
        action(ev.currentTarget, function () {
          return api('POST', 'api/v1/webhook-endpoints/' + e.id + '/test', {}).then(function () {
            announce(t('testQueued', name)); return refresh();
          });
        });
      } }));
      actions.appendChild(h('button', { type: 'button', 'class': on ? 'danger' : '', 'data-action': on ? 'disable' : 'enable', text: on ? t('disable') : t('enable'), on: function (ev) {
        if (on && !window.confirm(t('confirmDisable', name))) { return; }
        action(ev.currentTarget, function () {
          return api('PATCH', 'api/v1/webhook-endpoints/' + e.id, { enabled: !on }).then(function () {
            announce(on ? t('disabledDone', name) : t('enabledDone', name)); return refresh();
          });
        });
      } }));
      actions.appendChild(h('button', { type: 'button', 'class': 'secondary', 'data-action': 'rotate', text: t('rotate'), on: function (ev) {
        if (!window.confirm(t('confirmRotate', name))) { return; }
        action(ev.currentTarget, function () {
          return api('PATCH', 'api/v1/webhook-endpoints/' + e.id, { secret: true }).then(function (json) {
            showSecret(json.data.secret); announce(t('rotated', name)); return refresh(true);
          });
        });
      } }));
      actions.appendChild(h('button', { type: 'button', 'class': 'secondary', 'data-action': 'log', text: t('showLog'), on: function () {
        filters.endpointId = e.id; $('f-endpoint').value = e.id; firstPage(); $('log-h').focus();
      } }));
      card.appendChild(actions);
      var inputId = 'since-' + e.id;
      var since = h('input', { id: inputId, type: 'datetime-local', value: localInput(new Date(Date.now() - 24 * 3600 * 1000)) });
      card.appendChild(h('div', { 'class': 'recover' },
        h('div', {}, h('label', { 'for': inputId, text: t('recoverSince') }), since),
        h('button', { type: 'button', 'class': 'secondary', 'data-action': 'recover', text: t('recover'), on: function (ev) {
          var at = new Date(since.value);
          if (isNaN(at.getTime())) { fail(t('badSince')); since.focus(); return; }
          action(ev.currentTarget, function () {
            return api('POST', 'api/v1/webhook-endpoints/' + e.id + '/recover', { since: at.toISOString() }).then(function (json) {
              announce(t('recovered', json.data.requeued)); return refresh();
            });
          });
        } })));
      box.appendChild(card);
    });
    sel.value = filters.endpointId;
  }

  function showSecret(secret) {
    $('secret-value').value = secret || '';
    $('secret-section').hidden = false;
    $('secret-h').focus();
  }

  // --- The delivery log. ---

  function logQuery() {
    var q = ['limit=20'];
    if (filters.status) { q.push('status=' + encodeURIComponent(filters.status)); }
    if (filters.event) { q.push('event=' + encodeURIComponent(filters.event)); }
    if (filters.endpointId) { q.push('endpointId=' + encodeURIComponent(filters.endpointId)); }
    if (cursors[page]) { q.push('cursor=' + encodeURIComponent(cursors[page])); }
    return 'api/v1/webhook-deliveries?' + q.join('&');
  }

  function loadLog() {
    return api('GET', logQuery()).then(function (json) {
      logRows = json.data;
      nextCursor = json.page.nextCursor;
      renderLog();
    });
  }

  function lastResult(d) {
    if (d.lastError) { return d.lastError; }
    if (d.lastStatusCode !== null && d.lastStatusCode !== undefined) { return String(d.lastStatusCode); }
    return d.attempts ? t('noAnswer') : '—';
  }

  function renderLog() {
    var body = $('log-body');
    body.textContent = '';
    logRows.forEach(function (d) {
      body.appendChild(h('tr', { 'data-delivery': d.id },
        h('td', { text: when(d.createdAt) }),
        h('td', { text: d.event }),
        h('td', { text: endpointName(d.endpointId) }),
        h('td', {}, h('span', { 'class': 'badge ' + d.status, text: t(d.status) })),
        h('td', { 'class': 'num', text: String(d.attempts) }),
        h('td', { text: lastResult(d) }),
        h('td', {}, h('div', { 'class': 'actions' },
          h('button', { type: 'button', 'class': 'secondary', 'data-action': 'attempts', 'aria-label': t('showAttempts') + ' ' + d.event + ' ' + when(d.createdAt), text: t('showAttempts'), on: function () { showDetail(d.id); } }),
          h('button', { type: 'button', 'data-action': 'resend', 'aria-label': t('resend') + ' ' + d.event + ' ' + when(d.createdAt), text: t('resend'), on: function (ev) {
            action(ev.currentTarget, function () {
              return api('POST', 'api/v1/webhook-deliveries/' + d.id + '/resend', {}).then(function () {
                announce(t('resent')); return refresh();
              });
            });
          } })))));
    });
    $('log-empty').hidden = logRows.length > 0;
    $('first').disabled = page === 0;
    $('prev').disabled = page === 0;
    $('next').disabled = !nextCursor;
  }

  function firstPage() { cursors = ['']; page = 0; return loadLog().catch(function (e) { fail(e.message); }); }

  function showDetail(id) {
    return api('GET', 'api/v1/webhook-deliveries/' + id).then(function (json) {
      var d = json.data;
      $('detail-summary').textContent = t('attemptsFor', d.event, endpointName(d.endpointId)) + ' ' + t(d.status) + '.';
      var body = $('detail-body');
      body.textContent = '';
      if (!d.attemptLog.length) { body.appendChild(h('tr', {}, h('td', { colspan: '4', text: t('noAttempts') }))); }
      d.attemptLog.forEach(function (a) {
        body.appendChild(h('tr', {},
          h('td', { text: when(a.attemptedAt) }),
          h('td', { text: a.statusCode === null ? t('noAnswer') : String(a.statusCode) }),
          h('td', { 'class': 'num', text: a.durationMs === null ? '—' : a.durationMs + ' ms' }),
          h('td', { text: a.error || '—' })));
      });
      $('detail-section').hidden = false;
      $('detail-h').focus();
    }).catch(function (e) { fail(e.message); });
  }

  // --- Loading and refreshing. ---

  function refresh(keepCharts) {
    return api('GET', 'api/v1/webhook-endpoints').then(function (json) {
      endpoints = json.data;
      renderEndpoints();
      $('endpoints-section').hidden = false;
      $('log-section').hidden = false;
      var charted = keepCharts ? Promise.resolve() : Promise.all(endpoints.map(loadChart));
      return Promise.all([charted.then(renderEndpoints), loadLog()]);
    });
  }

  function rerender() {
    translate();
    if (token) { renderEndpoints(); renderLog(); }
  }

  function start() {
    translate();
    var m = /(?:^|&)code=([A-Za-z0-9]+)/.exec(location.hash.slice(1));
    // The code leaves the address bar (and the history) at once: it works only once anyway.
    history.replaceState(null, '', location.pathname + location.search);
    if (!m) { fail(t('noCode')); return; }
    announce(t('opening'));
    fetch('portal/v1/sessions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, credentials: 'omit',
      cache: 'no-store', referrerPolicy: 'no-referrer', body: JSON.stringify({ code: m[1] })
    }).then(function (res) {
      if (res.status !== 201) { throw new Error(t('badLink')); }
      return res.json();
    }).then(function (json) {
      token = json.data.token;
      var until = new Date(json.data.expiresAt);
      $('session').textContent = t('sessionUntil', when(until));
      window.setTimeout(ended, Math.max(0, until.getTime() - Date.now()));
      announce(t('loading'));
      return refresh().then(function () { announce(t('showing', logRows.length)); });
    }).catch(function (e) { fail(e.message); });
  }

  document.addEventListener('DOMContentLoaded', function () {
    $('lang').addEventListener('change', function (ev) {
      lang = ev.target.value === 'es' ? 'es' : 'en';
      var url = new URL(location.href);
      url.searchParams.set('lang', lang);
      history.replaceState(null, '', url.pathname + url.search);
      rerender();
    });
    $('filters').addEventListener('submit', function (ev) {
      ev.preventDefault();
      filters.status = $('f-status').value;
      filters.event = $('f-event').value;
      filters.endpointId = $('f-endpoint').value;
      firstPage().then(function () { announce(t('showing', logRows.length)); });
    });
    $('first').addEventListener('click', function () { firstPage(); });
    $('prev').addEventListener('click', function () {
      if (page > 0) { page -= 1; loadLog().catch(function (e) { fail(e.message); }); }
    });
    $('next').addEventListener('click', function () {
      if (!nextCursor) { return; }
      cursors[page + 1] = nextCursor; page += 1;
      loadLog().catch(function (e) { fail(e.message); });
    });
    $('close-detail').addEventListener('click', function () { $('detail-section').hidden = true; $('log-h').focus(); });
    $('copy-secret').addEventListener('click', function () {
      var v = $('secret-value').value;
      var done = function () { announce(t('copied')); };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(v).then(done, function () { $('secret-value').select(); fail(t('copyFailed')); });
      } else {
        $('secret-value').select(); fail(t('copyFailed'));
      }
    });
    $('hide-secret').addEventListener('click', function () {
      $('secret-value').value = ''; $('secret-section').hidden = true; $('endpoints-h').focus();
    });
    start();
  });
}());
