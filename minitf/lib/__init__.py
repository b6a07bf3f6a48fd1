"""Plain building blocks with no graph in them, as TF's ``core/lib``: checksums and file
formats (the TFRecord framing of event files and record readers, the checkpoint's tensor
bundle).  The lowest layer, beside ``framework``: it imports nothing else of minitf."""
