"""Plain building blocks with no graph in them, as TF's ``core/lib``: checksums and file
formats (the TFRecord framing of event files and record readers, the checkpoint's tensor
bundle, TF's histogram, TF's own protos).  The lowest layer, beside ``framework``: of the rest
of minitf it imports only ``framework.errors`` (the DataLossError of a damaged record)."""
