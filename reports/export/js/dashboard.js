// The dashboard's readout of a chart's hovered mark, and #id in the
// address marking its element. Embedded by tests/tools/embed_asset.py.
document.addEventListener('DOMContentLoaded',function(){
  var r=document.createElement('div');
  r.id='readout';
  document.body.appendChild(r);
  document.querySelectorAll('svg.chart [data-ns]').forEach(function(e){
    e.addEventListener('mouseenter',function(){
      var t=e.querySelector('title');
      r.textContent=t?t.textContent:'';
      r.style.display='block';
    });
  });
  if(location.hash){
    var e=null;
    try{
      e=document.querySelector(location.hash);
    }
    catch(x){}
    // #step=N: no id
    if(e&&e.classList)e.classList.add('sel');
  }
  document.body.setAttribute('data-script','ran');
});
