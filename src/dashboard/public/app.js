// Herald dashboard: small progressive enhancements. Every page works without this file; it adds
// copy-to-clipboard, select-on-focus for the one-time API key, carries the template editor's
// sample data into the test-email form, keeps a refresh of a page that answered a form (the new
// key) from sending that form again, and takes a message's cancel control away once it is no longer
// pending. htmx (loaded beside it) does the live preview, the checks and the message page's polls.
(function () {
  'use strict';

  // A page that answers a POST names the page a refresh should load instead: the browser's entry
  // becomes that address, so reloading asks for it (a GET) and never creates or rotates twice.
  var replacement = document.querySelector('[data-replace-url]');
  if (replacement && window.history && typeof window.history.replaceState === 'function')
    window.history.replaceState(null, '', replacement.getAttribute('data-replace-url'));

  function flash(button, text) {
    var original = button.getAttribute('data-label') || button.textContent;
    button.setAttribute('data-label', original);
    button.textContent = text;
    window.setTimeout(function () {
      button.textContent = original;
    }, 2000);
  }

  document.addEventListener('click', function (event) {
    var button = event.target instanceof Element ? event.target.closest('[data-copy]') : null;
    if (!button) return;
    var source = document.querySelector(button.getAttribute('data-copy'));
    if (!source) return;
    var value = 'value' in source ? source.value : source.textContent;
    var fallback = function () {
      if (typeof source.select === 'function') source.select();
      flash(button, 'Press Ctrl+C to copy');
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(value).then(function () {
        flash(button, 'Copied');
      }, fallback);
    } else {
      fallback();
    }
  });

  document.addEventListener('focusin', function (event) {
    var target = event.target;
    if (target instanceof HTMLInputElement && target.hasAttribute('data-select-on-focus')) target.select();
  });

  // A pending message's page polls its summary (htmx, every 2 s); its cancel control stays outside
  // the polled part, so that a poll does not close it while it is open. Once a poll shows the
  // message no longer pending (sent, failed or canceled meanwhile), the control goes with it.
  document.addEventListener('htmx:afterSettle', function () {
    var message = document.getElementById('message');
    if (!message || message.hasAttribute('hx-get')) return;
    var control = document.querySelector('[data-testid="cancel-message"]');
    if (control) control.remove();
  });

  // Capture phase: runs before htmx handles the submit, so both kinds of form get the value.
  document.addEventListener(
    'submit',
    function (event) {
      var form = event.target;
      if (!(form instanceof HTMLFormElement)) return;
      form.querySelectorAll('[data-fill-from]').forEach(function (input) {
        var source = document.querySelector(input.getAttribute('data-fill-from'));
        if (source) input.value = source.value;
      });
    },
    true,
  );
})();
