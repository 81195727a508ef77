"""S3 operations, one function per S3 call: each builds its request, sends it through a
:class:`~objsdk._transport.base.Transport` and turns the answer into objsdk values.
``Client`` checks its arguments and calls these; readers and transfers build on them.

Modules: :mod:`.buckets`, :mod:`.objects` (PUT and GET of one object), :mod:`.head`,
:mod:`.listing`, :mod:`.deletes`, :mod:`.copies`, :mod:`.versions`, :mod:`.tagging`,
:mod:`.presign`. (The multipart calls live beside their engine, in
:mod:`objsdk._transfer.multipart_calls`.)
"""
