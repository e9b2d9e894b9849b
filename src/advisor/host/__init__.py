"""On a host: the sysfs topology probe (:mod:`topology`) and support tickets (:mod:`tickets`)."""
