// Herald dashboard: small progressive enhancements. Every page works without this file; it adds
// copy-to-clipboard, select-on-focus for the one-time API key, and carries the template editor's
// sample data into the test-email form. htmx (loaded beside it) does the live preview and checks.
(function () {
  'use strict';

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
