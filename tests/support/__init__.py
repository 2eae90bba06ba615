"""What tests share: running the installed `trinity` (cli), scripted providers and policies
(scripted), the documented synthetic records (learnable_record) and their learning protocol
(learning), and loopback servers speaking each provider's wire format (wire). No test module
imports another test module; they import from here."""
