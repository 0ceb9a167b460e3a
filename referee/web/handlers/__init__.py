"""The request handlers, grouped by what they are about; the URLs are in
:mod:`referee.web.routes`. A page and its JSON mirror sit side by side and
share their data (:mod:`referee.web.data`)."""
