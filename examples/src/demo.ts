console.log('demo: coming with @troupe/core');
